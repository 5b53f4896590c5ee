package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/k3-project/k3/atomicfile"
	"github.com/k3-project/k3/cache/sim"
)

// plotPath returns --plot ("" when absent). A path the chart could not be saved to is a mistake
// recorded in a.err, found before any work is done.
func (a *args) plotPath() string {
	p, ok := a.vals["--plot"]
	if !ok || a.err != nil {
		return p
	}
	if ext := filepath.Ext(p); !strings.EqualFold(ext, ".svg") && !strings.EqualFold(ext, ".png") {
		a.check(usagef("--plot", "%s: the chart is written as .svg or .png", p))
	} else {
		a.check(writable("--plot", p))
	}
	return p
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = false
	return p
}

// plotSimCache draws the hit rate of each policy against the cache size (log scale).
func plotSimCache(rep sim.Report, path, trace string) error {
	p := newPlot(fmt.Sprintf("Expert cache hit rate (%s: %d requests)", filepath.Base(trace), rep.Requests),
		"cache size (GB, log scale)", "hit rate (%)")
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, r := range rep.Rows {
		if r.GB > 0 {
			ticks = append(ticks, plot.Tick{Value: r.GB, Label: strconv.FormatFloat(r.GB, 'g', 2, 64)})
		}
	}
	p.X.Tick.Marker = ticks
	// Legends are left-aligned (text after the sample line) so that a viewer substituting a
	// wider font than the Liberation metrics the layout used overflows into empty space, not
	// onto the samples; placed in the empty lower right of a rising curve.
	p.Legend.Top, p.Legend.Left, p.Legend.XOffs = false, true, 8*vg.Centimeter
	// Each policy's hit rate (in percent) at the sizes above zero, name before series, for
	// plotutil, which gives each its own colour, dashes and glyph.
	var series []any
	for i, name := range sim.PolicyNames {
		var xy plotter.XYs
		for _, r := range rep.Rows {
			if r.GB > 0 {
				xy = append(xy, plotter.XY{X: r.GB, Y: r.Outcomes()[i].HitRate()})
			}
		}
		series = append(series, name, xy)
	}
	if err := plotutil.AddLinePoints(p, series...); err != nil {
		return err
	}
	if rep.ReusePct > 0 {
		// The compulsory-miss ceiling: no policy can beat it.
		ceil := plotter.XYs{{X: rep.Rows[0].GB, Y: rep.ReusePct}, {X: rep.Rows[len(rep.Rows)-1].GB, Y: rep.ReusePct}}
		l, err := plotter.NewLine(ceil)
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Gray{Y: 0x60}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("reuse ceiling %.1f%%", rep.ReusePct), l)
	}
	p.Y.Min, p.Y.Max = 0, 100 // after the data: Add widens the range to the data's
	// A right margin for the last tick label, which a wider substituted font would push past
	// the edge.
	return saveChart(path, 16*vg.Centimeter, 10*vg.Centimeter, func(c draw.Canvas) {
		p.Draw(draw.Crop(c, 0, -6*vg.Millimeter, 0, 0))
	})
}

// plotLadder draws s/token and peak RSS against the trunk budget of the rungs that ran with a
// budget (mapped has none), one panel each, stacked.
func plotLadder(rows []rung, path, model string) error {
	var spt, rss, plan plotter.XYs
	for _, r := range rows {
		if r.RunError != "" || r.Budget == "mapped" {
			continue
		}
		x := float64(r.BudgetBytes) / 1e6
		spt = append(spt, plotter.XY{X: x, Y: r.SecondsPerTok})
		rss = append(rss, plotter.XY{X: x, Y: float64(r.PeakRSS) / 1e6})
		plan = append(plan, plotter.XY{X: x, Y: float64(r.PlanTotal) / 1e6})
	}
	if len(spt) == 0 {
		return fmt.Errorf("no budgeted rung succeeded, nothing to draw")
	}
	top := newPlot(fmt.Sprintf("Memory ladder: %s", filepath.Base(model)), "trunk budget (MB)", "seconds per token")
	bottom := newPlot("", "trunk budget (MB)", "peak RSS (MB)")
	if err := plotutil.AddLinePoints(top, "s/token", spt); err != nil {
		return err
	}
	if err := plotutil.AddLinePoints(bottom, "peak RSS (getrusage)", rss, "plan total", plan); err != nil {
		return err
	}
	for _, p := range []*plot.Plot{top, bottom} {
		p.Y.Min = 0
	}
	// s/token falls with the budget (top right is free); RSS and the plan rise with it, their
	// legend sits between them on the right. Left-aligned text: see plotSimCache.
	top.Legend.Top, top.Legend.Left, top.Legend.XOffs = true, true, 9*vg.Centimeter
	bottom.Legend.Top, bottom.Legend.Left, bottom.Legend.XOffs = false, true, 8*vg.Centimeter
	bottom.Legend.YOffs = 2 * vg.Centimeter
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}
	return saveChart(path, 16*vg.Centimeter, 14*vg.Centimeter, func(c draw.Canvas) {
		canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, c)
		top.Draw(canvases[0][0])
		bottom.Draw(canvases[1][0])
	})
}

// saveChart draws a w × h chart with drawTo on an SVG or PNG canvas, as the extension of path
// says, and writes it to path.
func saveChart(path string, w, h vg.Length, drawTo func(draw.Canvas)) error {
	var c vg.CanvasWriterTo = vgsvg.New(w, h)
	if strings.EqualFold(filepath.Ext(path), ".png") {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	}
	drawTo(draw.New(c))
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := c.WriteTo(f); err != nil {
		return err
	}
	return f.Commit()
}
