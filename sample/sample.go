package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/k3-project/k3/internal/kernels/fmath"
)

// Errors of a pick or of New, for errors.Is.
var (
	// ErrOptions reports Options outside their documented ranges.
	ErrOptions = errors.New("sample: invalid options")
	// ErrEmpty reports an empty logits slice.
	ErrEmpty = errors.New("sample: no logits")
	// ErrAllNaN reports logits that are all NaN, so nothing can be picked.
	ErrAllNaN = errors.New("sample: every logit is NaN")
)

// Options configures a Sampler. The zero value is greedy decoding (Argmax).
//
// A pick runs these stages in this fixed order, all in float64:
//
//  1. penalties, for every id occurring in the last PenaltyWindow history ids (c = its count):
//     l = l/RepeatPenalty if l > 0 else l·RepeatPenalty; then l −= c·FrequencyPenalty, and
//     l −= PresencePenalty once;
//  2. Temperature 0: the first maximum of the penalised logits (strict > scan, NaN never picked),
//     which is Argmax when no penalty applies; the remaining stages are skipped;
//  3. z = l/Temperature; candidates (NaN dropped) sorted by z descending, ties by id ascending;
//  4. top-k: the first TopK candidates;
//  5. softmax: e_i = exp64(z_i − z_0), summed in candidate order;
//  6. top-p: the shortest prefix whose probability e/Σe reaches TopP;
//  7. min-p: the prefix of candidates with e_i ≥ MinP·e_0;
//  8. draw: u from the generator (below), target = u·Σkept e; the first candidate whose running
//     sum of e exceeds target (the last kept one if rounding leaves none).
//
// The random source is xoshiro256** (Blackman and Vigna, 2018) with its 256-bit state seeded
// by four outputs of SplitMix64(Seed); u = (next() >> 11)·2⁻⁵³. Plain decoding draws exactly
// one u per sampled token (none when greedy); speculative verification draws one per verified
// draft token and one more after a rejection. Nothing depends on thread count, build tags or the
// machine, so one seed gives one token sequence everywhere.
type Options struct {
	// Temperature ≥ 0 divides the logits; 0 means greedy.
	Temperature float64
	// TopK ≥ 0 keeps the K most likely candidates; 0 keeps all.
	TopK int
	// TopP in [0, 1] keeps the most likely candidates up to this probability mass; 0 and 1 keep all.
	TopP float64
	// MinP in [0, 1) drops candidates less likely than MinP times the most likely one; 0 is off.
	MinP float64
	// RepeatPenalty ≥ 1 divides positive (multiplies negative) logits of recent ids; 0 and 1
	// are off.
	RepeatPenalty float64
	// FrequencyPenalty and PresencePenalty (finite, either sign) are subtracted per occurrence
	// and once per recent id.
	FrequencyPenalty, PresencePenalty float64
	// PenaltyWindow ≥ 0 is how many of the most recent history ids the penalties look at; 0
	// means the whole history.
	PenaltyWindow int
	// Seed selects the random stream.
	Seed uint64
}

func (o Options) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !finite(o.Temperature) || o.Temperature < 0:
		return fmt.Errorf("%w: temperature %v (want a finite value ≥ 0)", ErrOptions, o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("%w: top-k %d < 0", ErrOptions, o.TopK)
	case !(o.TopP >= 0 && o.TopP <= 1):
		return fmt.Errorf("%w: top-p %v outside [0, 1]", ErrOptions, o.TopP)
	case !(o.MinP >= 0 && o.MinP < 1):
		return fmt.Errorf("%w: min-p %v outside [0, 1)", ErrOptions, o.MinP)
	case !finite(o.RepeatPenalty) || (o.RepeatPenalty != 0 && o.RepeatPenalty < 1):
		return fmt.Errorf("%w: repeat penalty %v (want 0 or a finite value ≥ 1)", ErrOptions, o.RepeatPenalty)
	case !finite(o.FrequencyPenalty) || !finite(o.PresencePenalty):
		return fmt.Errorf("%w: frequency/presence penalties must be finite", ErrOptions)
	case o.PenaltyWindow < 0:
		return fmt.Errorf("%w: penalty window %d < 0", ErrOptions, o.PenaltyWindow)
	}
	return nil
}

func (o Options) penalised() bool {
	return (o.RepeatPenalty != 0 && o.RepeatPenalty != 1) || o.FrequencyPenalty != 0 || o.PresencePenalty != 0
}

// Sampler picks tokens from logits as Options describes. Its only state is the random
// generator, which advances by one draw per sampled token; a state file (the root package's Session.Save) records
// it, so a restored sampler continues the same stream. A Sampler is not safe for concurrent use.
type Sampler struct {
	o   Options
	rng xoshiro

	// Scratch reused across picks.
	cand   []candidate
	counts map[int]int
}

// candidate is one token in the sampling stages: its scaled logit and unnormalised weight.
type candidate struct {
	id int
	z  float64
	e  float64
}

// New validates o and returns a sampler at the start of its seed's stream.
func New(o Options) (*Sampler, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Sampler{o: o, rng: newXoshiro(o.Seed)}, nil
}

// Resume is New with the random generator at state, as State returned it: a sampler saved in
// the middle of its stream continues it.
func Resume(o Options, state [4]uint64) (*Sampler, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	s.rng.s = state
	return s, nil
}

// State returns the random generator's state, for Resume.
func (s *Sampler) State() [4]uint64 { return s.rng.s }

// Options returns the sampler's configuration.
func (s *Sampler) Options() Options { return s.o }

// Greedy reports whether the sampler never draws (Temperature 0).
func (s *Sampler) Greedy() bool { return s.o.Temperature == 0 }

// Sample picks the next token from logits given the ids so far (for the penalties; ignored
// without them). It returns ErrEmpty for empty logits and ErrAllNaN when nothing can be
// picked.
func (s *Sampler) Sample(logits []float32, history []int) (int, error) {
	if s.Greedy() {
		return s.greedy(logits, history)
	}
	c, err := s.candidates(logits, history)
	if err != nil {
		return 0, err
	}
	return c[s.draw(c, -1)].id, nil
}

// penalty applies stage 1 to the counted ids, calling f for each penalised id with its new value.
func (s *Sampler) penalties(logits []float32, history []int, f func(id int, l float64)) {
	if !s.o.penalised() {
		return
	}
	w := history
	if n := s.o.PenaltyWindow; n > 0 && len(w) > n {
		w = w[len(w)-n:]
	}
	if s.counts == nil {
		s.counts = make(map[int]int)
	}
	clear(s.counts)
	for _, id := range w {
		if id >= 0 && id < len(logits) {
			s.counts[id]++
		}
	}
	for _, id := range w { // history order, so the visit order is fixed
		c := s.counts[id]
		if c == 0 {
			continue
		}
		s.counts[id] = 0
		l := float64(logits[id])
		if rp := s.o.RepeatPenalty; rp != 0 && rp != 1 {
			if l > 0 {
				l /= rp
			} else {
				l *= rp
			}
		}
		l -= float64(c) * s.o.FrequencyPenalty
		l -= s.o.PresencePenalty
		f(id, l)
	}
}

func (s *Sampler) greedy(logits []float32, history []int) (int, error) {
	if !s.o.penalised() {
		return Argmax(logits)
	}
	if len(logits) == 0 {
		return 0, ErrEmpty
	}
	pen := make(map[int]float64)
	s.penalties(logits, history, func(id int, l float64) { pen[id] = l })
	best, bv := -1, 0.0
	for i, v := range logits {
		l := float64(v)
		if p, ok := pen[i]; ok {
			l = p
		}
		if l != l {
			continue
		}
		if best < 0 || l > bv {
			best, bv = i, l
		}
	}
	if best < 0 {
		return 0, ErrAllNaN
	}
	return best, nil
}

// candidates runs stages 1 and 3–7 and returns the kept candidates (reused scratch), most
// likely first, with e set.
func (s *Sampler) candidates(logits []float32, history []int) ([]candidate, error) {
	if len(logits) == 0 {
		return nil, ErrEmpty
	}
	c := s.cand[:0]
	t := s.o.Temperature
	for i, v := range logits {
		if v == v {
			c = append(c, candidate{id: i, z: float64(v)})
		}
	}
	if len(c) == 0 {
		return nil, ErrAllNaN
	}
	if s.o.penalised() {
		// c holds every non-NaN id in ascending id order.
		s.penalties(logits, history, func(id int, l float64) {
			if j, ok := slices.BinarySearchFunc(c, id, func(x candidate, id int) int { return x.id - id }); ok {
				c[j].z = l
			}
		})
	}
	for j := range c {
		c[j].z /= t
	}
	slices.SortFunc(c, func(a, b candidate) int {
		switch {
		case a.z > b.z:
			return -1
		case a.z < b.z:
			return 1
		}
		return a.id - b.id
	})
	s.cand = c
	if k := s.o.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	if math.IsInf(c[0].z, 1) {
		// The softmax limit puts all mass on the +Inf logits: keep those, equally likely.
		n := 1
		for n < len(c) && math.IsInf(c[n].z, 1) {
			n++
		}
		c = c[:n]
		for j := range c {
			c[j].e = 1
		}
		return c, nil
	}
	var sum float64
	for j := range c {
		c[j].e = fmath.Exp64(c[j].z - c[0].z)
		sum += c[j].e
	}
	if p := s.o.TopP; p > 0 && p < 1 {
		var run float64
		for j := range c {
			run += c[j].e
			if run/sum >= p {
				c = c[:j+1]
				break
			}
		}
	}
	if mp := s.o.MinP; mp > 0 {
		floor := mp * c[0].e
		n := 1
		for n < len(c) && c[n].e >= floor {
			n++
		}
		c = c[:n]
	}
	return c, nil
}

// draw picks an index of c by weight e (stage 8), skipping index skip (−1: none), which is the
// residual distribution of speculative sampling after a rejected draft.
func (s *Sampler) draw(c []candidate, skip int) int {
	var total float64
	for j := range c {
		if j != skip {
			total += c[j].e
		}
	}
	target := s.rng.float64() * total
	var run float64
	last := -1
	for j := range c {
		if j == skip {
			continue
		}
		last = j
		run += c[j].e
		if target < run {
			return j
		}
	}
	return last
}

// Accept decides a drafted token by the speculative sampling rule for a point-mass draft:
// accept d with probability p(d); on rejection draw from p with d removed and renormalised.
// It returns the token to emit and whether it is d. A greedy sampler accepts exactly when d is
// its pick.
func (s *Sampler) Accept(logits []float32, history []int, d int) (int, bool, error) {
	if s.Greedy() {
		id, err := s.greedy(logits, history)
		return id, err == nil && id == d, err
	}
	c, err := s.candidates(logits, history)
	if err != nil {
		return 0, false, err
	}
	j := slices.IndexFunc(c, func(x candidate) bool { return x.id == d })
	var total float64
	for i := range c {
		total += c[i].e
	}
	u := s.rng.float64()
	if j >= 0 && u*total < c[j].e {
		return d, true, nil
	}
	return c[s.draw(c, j)].id, false, nil
}

// xoshiro is xoshiro256** (Blackman & Vigna), a 256-bit-state generator with 64-bit outputs.
type xoshiro struct{ s [4]uint64 }

// newXoshiro seeds the state with four SplitMix64 outputs, as the generator's authors advise.
func newXoshiro(seed uint64) xoshiro {
	var x xoshiro
	for i := range x.s {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		x.s[i] = z ^ (z >> 31)
	}
	return x
}

func rotl(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }

func (x *xoshiro) next() uint64 {
	s := &x.s
	r := rotl(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = rotl(s[3], 45)
	return r
}

// float64 returns a uniform value in [0, 1) with 53 random bits.
func (x *xoshiro) float64() float64 { return float64(x.next()>>11) * 0x1p-53 }

// Argmax returns the greedy pick of §4.9: the first index holding the maximum logit, found
// with a strict > scan from index 0, never a NaN. It returns ErrAllNaN when every logit is NaN
// and ErrEmpty for an empty slice.
func Argmax(logits []float32) (int, error) {
	if len(logits) == 0 {
		return 0, ErrEmpty
	}
	best := -1
	var bv float32
	for i, v := range logits {
		if v != v { // NaN
			continue
		}
		if best < 0 || v > bv {
			best, bv = i, v
		}
	}
	if best < 0 {
		return 0, ErrAllNaN
	}
	return best, nil
}
