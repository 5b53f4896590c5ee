package cache

import "time"

// Prefetch starts background reads of the experts ids of layer that are
// neither resident nor being read, for a prediction such as router
// lookahead (layer L+1's router applied to layer L's hidden state). It
// never blocks on I/O and never evicts a leased or INFLIGHT slot; when no
// slot can be had the rest of the prediction is dropped. The reads count as
// prefetch reads, apart from demand misses; a later request served from one
// counts as prefetch used, and one evicted unused as prefetch wasted.
//
// The prediction itself is scored against the next demand call for the
// layer (Stats: Predicted, PredictedHits, PredictedActual), also without a
// cache, which gives the predictor's precision and recall. Invalid ids and
// unknown layers are ignored (a prediction is advisory).
func (s *Store) Prefetch(layer int, ids []int) {
	if layer < 0 || layer >= len(s.layerIdx) || s.layerIdx[layer] < 0 {
		return
	}
	li := int(s.layerIdx[layer])
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	p := s.pred[li][:0]
	for _, id := range ids {
		if id >= 0 && id < s.cfg.NumExperts {
			p = append(p, id)
		}
	}
	s.pred[li] = p
	s.add(func(c *counters) { c.prefetchRequests += int64(len(p)) })
	var reads []int32
	if s.nslots > 0 {
		reads = s.reserveBackground(li, p, originPrefetch)
	}
	s.mu.Unlock()
	s.startBackground(reads, originPrefetch)
}

// reserveBackground reserves slots for the ids of layer index li that are
// neither resident nor in flight. Called under mu.
func (s *Store) reserveBackground(li int, ids []int, origin uint8) []int32 {
	s.fillSeq++
	token := s.fillSeq
	var reads []int32
	for n, id := range ids {
		k := s.key(li, id)
		if s.slotOf[k] >= 0 {
			continue
		}
		// Background reads never take the slots one token's working set
		// needs (TopK + 1), so they cannot starve a demand call.
		var err error
		sl := int32(-1)
		if s.bgInflight < s.nslots-s.cfg.TopK-1 {
			sl, err = s.reserve(k, token, origin)
		} else {
			err = ErrNoEvictableSlot
		}
		if err != nil {
			if origin == originPrefetch {
				s.add(func(c *counters) { c.prefetchDropped += int64(len(ids) - n) })
			}
			break
		}
		reads = append(reads, sl)
		s.bgInflight++
	}
	if len(reads) > 0 {
		s.bg.Add(1) // under mu, so Close cannot miss it
	}
	return reads
}

// startBackground reads slots reserveBackground reserved on a background
// goroutine and publishes them.
func (s *Store) startBackground(reads []int32, origin uint8) {
	if len(reads) == 0 {
		return
	}
	go func() {
		defer s.bg.Done()
		t0 := time.Now()
		errs, dec := s.readSlots(reads, nil)
		d := time.Since(t0)
		s.mu.Lock()
		s.add(func(c *counters) {
			c.prefetchNanos += int64(d)
			c.decodeNanos += int64(dec)
		})
		s.publish(reads, errs, origin)
		s.bgInflight -= len(reads)
		s.bgDone++
		for i, sl := range reads {
			if errs[i] != nil {
				s.free = append(s.free, sl) // a failed prefetch holds no lease
			}
		}
		s.mu.Unlock()
	}()
}
