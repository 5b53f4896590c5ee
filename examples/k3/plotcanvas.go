package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// canvas is an SVG or PNG canvas chosen by the file name.
type canvas struct {
	path string
	c    vg.CanvasSizer
}

func newCanvas(path string, w, h vg.Length) (*canvas, error) {
	if strings.EqualFold(filepath.Ext(path), ".png") {
		return &canvas{path, vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}}, nil
	}
	return &canvas{path, vgsvg.New(w, h)}, nil
}

func (c *canvas) save() error {
	f, err := os.Create(c.path)
	if err != nil {
		return err
	}
	_, err = c.c.(io.WriterTo).WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
