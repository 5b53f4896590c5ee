package main

import (
	"fmt"
	"io"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/sysmem"
)

// tokenCounters turns the stores' run counters into per-token figures.
type tokenCounters struct{ read int64 } // bytes read by the stores so far

// step returns the true resident hit rate of the token just finished (the cache's Step
// counters; "-" without a cache) and the bytes read since the previous call (trunk pieces,
// lm_head, embedding rows and experts).
func (c *tokenCounters) step(m *k3.Model) (hit string, read int64) {
	hit, st := "    -", m.Stats()
	if st.Cache != nil && st.Cache.Step.Requests > 0 {
		hit = fmt.Sprintf("%4.1f%%", 100*st.Cache.Step.TrueHitRate)
	}
	total := bytesRead(st)
	read, c.read = total-c.read, total
	return hit, read
}

// bytesRead is what the stores have read since the model was opened: trunk pieces, lm_head,
// embedding rows and experts (nothing when everything is memory-mapped).
func bytesRead(st k3.Stats) int64 {
	var n int64
	if st.Trunk != nil {
		n += st.Trunk.TotalBytes()
	}
	if st.Cache != nil {
		n += st.Cache.Run.BytesRead
	}
	return n
}

// stats fills in the report's memory and traffic figures and prints the expert cache's and the
// trunk store's counters.
func (rep *report) stats(m *k3.Model, w io.Writer) {
	rep.PeakRSSBytes, rep.RSSFileBytes, rep.Plan = sysmem.PeakRSS(), sysmem.RSSFile(), m.Plan()
	if st := m.Stats().Cache; st != nil {
		r := st.Run
		rep.ExpertBytesRead, rep.Cache = r.BytesRead, st
		fmt.Fprintf(w, "k3: experts: %d requests, %d hits, %d misses, %d evictions, true resident hit rate %.1f%%, %s read in %.2f s; lookahead precision %.0f%% recall %.0f%%\n",
			r.Requests, r.Hits, r.Misses, r.Evictions, 100*r.TrueHitRate, size(rep.ExpertBytesRead), r.LoadSeconds,
			100*r.PredictPrecision, 100*r.PredictRecall)
	}
	if st := m.Stats().Trunk; st != nil {
		rep.TrunkBytesRead, rep.EmbedBytesRead, rep.HeadBytesRead = st.BytesRead, st.EmbedBytes, st.HeadBytes
		rep.Trunk = st
		fmt.Fprintf(w, "k3: trunk: %s streamed + %s lm_head + %s embedding rows read in %d reads (%s); device %.2f s, compute waited %.2f s (overlap %.0f%%)\n",
			size(st.BytesRead), size(st.HeadBytes), size(st.EmbedBytes), st.Reads, st.Mode,
			st.DeviceSeconds, st.WaitSeconds, 100*st.Overlap())
	}
}

// printSummary is the run's closing block (§11.1 run report): tokens, s/token, the true
// resident hit rate, the I/O share of the wall clock (trunk device seconds plus expert demand
// load seconds over the generation's wall time; above 100% when reads overlap compute), the
// bytes read and their rates, and the peak RSS from getrusage.
func printSummary(w io.Writer, rep *report, genSeconds float64) {
	n := len(rep.GeneratedIDs)
	spt := "-"
	if rep.SecondsPerToken != nil {
		spt = fmt.Sprintf("%.4f", *rep.SecondsPerToken)
	}
	fmt.Fprintf(w, "k3: summary: %d tokens, %s s/token, layers completed %d of %d, expert drops %d\n",
		n, spt, rep.LayersCompleted, rep.LayersRequested, rep.ExpertDrops)
	var trunkSec, expertSec float64
	if st := rep.Trunk; st != nil {
		trunkSec = st.DeviceSeconds
	}
	if st := rep.Cache; st != nil {
		expertSec = st.Run.LoadSeconds
		fmt.Fprintf(w, "k3: summary: true resident hit rate %.1f%% (%d of %d expert requests)\n",
			100*st.Run.TrueHitRate, st.Run.TrueHits, st.Run.Requests)
	} else {
		fmt.Fprintln(w, "k3: summary: true resident hit rate - (experts memory-mapped; the page cache serves them)")
	}
	if genSeconds > 0 {
		fmt.Fprintf(w, "k3: summary: I/O share of wall clock %.1f%% (trunk device %.2f s + expert loads %.2f s over %.2f s)\n",
			100*(trunkSec+expertSec)/genSeconds, trunkSec, expertSec, genSeconds)
	}
	trunkRead := rep.TrunkBytesRead + rep.HeadBytesRead + rep.EmbedBytesRead
	fmt.Fprintf(w, "k3: summary: trunk %s read (%s), experts %s read (%s)\n",
		size(trunkRead), rate(trunkRead, trunkSec), size(rep.ExpertBytesRead), rate(rep.ExpertBytesRead, expertSec))
	fmt.Fprintf(w, "k3: summary: PEAK RSS %s (%d bytes, getrusage maxrss for the whole run)\n",
		size(rep.PeakRSSBytes), rep.PeakRSSBytes)
}

func rate(bytes int64, sec float64) string {
	if sec <= 0 {
		return "- B/s"
	}
	return size(int64(float64(bytes)/sec)) + "/s"
}
