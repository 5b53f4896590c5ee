package cache

import "time"

// counters are one period's raw counts (a step or the whole run).
type counters struct {
	requests, hits, misses, trueHits, evictions, bytesRead, loadNanos int64
	prefetchRequests, prefetchReads, prefetchUsed, prefetchWasted     int64
	prefetchDropped, prefetchBytes, prefetchNanos                     int64
	specReads, specUsed, specWasted                                   int64
	predicted, predictedHits, predictedActual                         int64
	failures, readErrors                                              int64
	decodeNanos                                                       int64
}

// Counters are the §9.5 figures of one token step or of the run.
type Counters struct {
	// Requests is the experts asked for by demand calls (Experts). Hits
	// were served by a slot holding the expert (or being filled by a
	// prefetch); Misses needed a demand read. TrueHits were served by
	// content already resident when the current step began (BeginStep).
	Requests  int64 `json:"requests"`
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	TrueHits  int64 `json:"true_hits"`
	Evictions int64 `json:"evictions"`
	// BytesRead is expert bytes read from storage by demand, prefetch and
	// speculative reads, as stored: a coded expert counts its records, not
	// its decoded size. LoadSeconds is the wall time of demand reads
	// (decoding included); DecodeSeconds the time read goroutines spent
	// decoding coded experts (demand and background, summed over
	// goroutines).
	BytesRead     int64   `json:"bytes_read"`
	LoadSeconds   float64 `json:"load_seconds"`
	DecodeSeconds float64 `json:"decode_seconds"`
	// Prefetch: ids passed to Prefetch, slots it filled, of those the ones
	// later requested (used) or evicted unrequested (wasted), ids dropped
	// for want of an evictable slot, and its bytes and seconds.
	PrefetchRequests int64   `json:"prefetch_requests"`
	PrefetchReads    int64   `json:"prefetch_reads"`
	PrefetchUsed     int64   `json:"prefetch_used"`
	PrefetchWasted   int64   `json:"prefetch_wasted"`
	PrefetchDropped  int64   `json:"prefetch_dropped"`
	PrefetchBytes    int64   `json:"prefetch_bytes"`
	PrefetchSeconds  float64 `json:"prefetch_seconds"`
	// Speculation (WithSpeculation): slots filled, later requested, evicted
	// unrequested.
	SpecReads  int64 `json:"spec_reads"`
	SpecUsed   int64 `json:"spec_used"`
	SpecWasted int64 `json:"spec_wasted"`
	// Predictions scored against the next demand call of their layer: ids
	// predicted, ids those calls requested, predicted ids requested.
	Predicted       int64 `json:"predicted"`
	PredictedActual int64 `json:"predicted_actual"`
	PredictedHits   int64 `json:"predicted_hits"`
	// Failures is demand calls that failed; ReadErrors failed or short
	// reads (demand or background).
	Failures   int64 `json:"failures"`
	ReadErrors int64 `json:"read_errors"`

	// Derived: Hits/Requests; TrueHits/Requests; kimi-k3-in-c's
	// approximation max(Hits − PrefetchReads, 0)/Requests; retention
	// (Requests − Evictions)/Requests; BytesRead/(Requests·ExpertBytes);
	// PredictedHits/Predicted (precision) and PredictedHits/PredictedActual
	// (recall). Zero when the denominator is.
	HitRate           float64 `json:"hit_rate"`
	TrueHitRate       float64 `json:"true_hit_rate"`
	ApproxTrueHitRate float64 `json:"approx_true_hit_rate"`
	Retention         float64 `json:"retention"`
	ByteRatio         float64 `json:"byte_ratio"`
	PredictPrecision  float64 `json:"predict_precision"`
	PredictRecall     float64 `json:"predict_recall"`
}

// Stats is a snapshot of a Store's configuration and counters.
type Stats struct {
	Policy      PolicyName `json:"policy"`
	Slots       int        `json:"slots"`
	SlotBytes   int64      `json:"slot_bytes"`
	ExpertBytes int64      `json:"expert_bytes"`
	BudgetBytes int64      `json:"budget_bytes"`
	MaxBatch    int        `json:"max_batch"`
	// IOMode is "direct", "buffered" or "mixed"; IOFallback why direct
	// reads are not used, when the reader says.
	IOMode     string `json:"io_mode"`
	IOFallback string `json:"io_fallback,omitempty"`
	HugePages  bool   `json:"huge_pages"`
	// Speculation reports whether WithSpeculation is in effect.
	Speculation bool  `json:"speculation"`
	Steps       int64 `json:"steps"`
	// Resident and Leased count slots at the snapshot.
	Resident int      `json:"resident"`
	Leased   int      `json:"leased"`
	Step     Counters `json:"step"`
	Run      Counters `json:"run"`
}

// Stats returns the current step's and the run's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Policy: s.opts.policy, Slots: s.nslots, SlotBytes: s.slotBytes, ExpertBytes: s.expertBytes,
		BudgetBytes: s.cfg.Budget, MaxBatch: s.maxBatch, Speculation: s.speculate, Steps: s.steps,
		Step: s.cur.export(s.expertBytes), Run: s.run.export(s.expertBytes),
	}
	if s.nslots == 0 {
		st.Policy = ""
	}
	st.IOMode, st.IOFallback = s.ioMode()
	st.HugePages = s.arena != nil && s.arena.huge
	for i := range s.slots {
		if s.slots[i].state == stateResident {
			st.Resident++
		}
		if s.slots[i].leases > 0 {
			st.Leased++
		}
	}
	return st
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (c *counters) export(expertBytes int64) Counters {
	return Counters{
		Requests: c.requests, Hits: c.hits, Misses: c.misses, TrueHits: c.trueHits, Evictions: c.evictions,
		BytesRead: c.bytesRead, LoadSeconds: time.Duration(c.loadNanos).Seconds(),
		DecodeSeconds:    time.Duration(c.decodeNanos).Seconds(),
		PrefetchRequests: c.prefetchRequests, PrefetchReads: c.prefetchReads, PrefetchUsed: c.prefetchUsed,
		PrefetchWasted: c.prefetchWasted, PrefetchDropped: c.prefetchDropped, PrefetchBytes: c.prefetchBytes,
		PrefetchSeconds: time.Duration(c.prefetchNanos).Seconds(),
		SpecReads:       c.specReads, SpecUsed: c.specUsed, SpecWasted: c.specWasted,
		Predicted: c.predicted, PredictedActual: c.predictedActual, PredictedHits: c.predictedHits,
		Failures: c.failures, ReadErrors: c.readErrors,
		HitRate: ratio(c.hits, c.requests), TrueHitRate: ratio(c.trueHits, c.requests),
		ApproxTrueHitRate: ratio(max(c.hits-c.prefetchReads, 0), c.requests),
		Retention:         ratio(c.requests-c.evictions, c.requests),
		ByteRatio:         ratio(c.bytesRead, c.requests*expertBytes),
		PredictPrecision:  ratio(c.predictedHits, c.predicted),
		PredictRecall:     ratio(c.predictedHits, c.predictedActual),
	}
}
