package k3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/tokenizer"
)

// Example is the one path through the library: plan a memory budget, open the model under it,
// and generate text. The checkpoint is synthesized (random weights of the tiny geometry, with a
// tokenizer), so the text means nothing, but every step is the one a real checkpoint takes.
func Example() {
	dir, remove := tinyCheckpoint(42)
	defer remove()

	// Plan first: PlanFor reads only headers, and refuses a budget below the floor.
	budget := []k3.Option{k3.WithTrunkBudget(64 << 20), k3.WithCacheBudget(16 << 20)}
	plan, err := k3.PlanFor(dir, budget...)
	if err != nil {
		log.Fatal(err)
	}
	m, err := k3.Open(dir, budget...)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	enc, err := tokenizer.LoadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	prompt, err := enc.Encode("The front door", tokenizer.AllowSpecial)
	if err != nil {
		log.Fatal(err)
	}
	var text []byte
	var res k3.GenerateResult
	for _, err := range m.Generate(context.Background(), prompt, k3.GenerateOptions{
		MaxTokens: 8,
		Tokens:    enc,
		OnText:    func(b []byte) { text = append(text, b...) },
		OnDone:    func(r k3.GenerateResult) { res = r },
	}) {
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(plan.Mapped, res.Reason, res.Tokens, len(text) > 0)
	// Output: false length 8 true
}

// ExampleModel_Generate decodes greedily, incrementally and by full recomputation; the two modes
// agree token for token (and bit for bit in their logits).
func ExampleModel_Generate() {
	m, done := tinyModel(42, k3.WithThreads(2))
	defer done()

	ctx := context.Background()
	prompt := []int{10, 20, 30}
	var inc, full []int
	for id, err := range m.Generate(ctx, prompt, k3.GenerateOptions{MaxTokens: 5}) {
		if err != nil {
			log.Fatal(err)
		}
		inc = append(inc, id)
	}
	for id, err := range m.Generate(ctx, prompt, k3.GenerateOptions{MaxTokens: 5, FullRecompute: true}) {
		if err != nil {
			log.Fatal(err)
		}
		full = append(full, id)
	}
	fmt.Println(len(inc), fmt.Sprint(inc) == fmt.Sprint(full))
	// Output: 5 true
}

// ExampleSession_Snapshot branches a conversation: the continuation after Restore is identical.
func ExampleSession_Snapshot() {
	m, done := tinyModel(1)
	defer done()
	ctx := context.Background()
	s := m.NewSession()
	if err := s.Prefill(ctx, []int{1, 2, 3}); err != nil {
		log.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		log.Fatal(err)
	}
	a, _ := s.Next()
	_ = s.Step(ctx, 7) // explore one branch
	if err := s.Restore(snap); err != nil {
		log.Fatal(err)
	}
	b, _ := s.Next()
	fmt.Println(a == b, s.Len())
	// Output: true 3
}

// ExampleSession_Save runs a two-turn conversation with a seeded sampler, saving the state
// after the first turn; the second turn from the loaded state matches an uninterrupted one.
func ExampleSession_Save() {
	m, done := tinyModel(5)
	defer done()
	ctx := context.Background()

	turn := func(s *k3.Session, sm *sample.Sampler, user []int) []int {
		if err := s.Prefill(ctx, user); err != nil {
			log.Fatal(err)
		}
		var out []int
		for id, err := range s.Generate(ctx, k3.GenerateOptions{MaxTokens: 4, Sampler: sm}) {
			if err != nil {
				log.Fatal(err)
			}
			out = append(out, id)
		}
		// Process the last reply token too, so the next turn continues from the whole history.
		if err := s.Step(ctx, out[len(out)-1]); err != nil {
			log.Fatal(err)
		}
		return out
	}

	sm, err := sample.New(sample.Options{Temperature: 0.8, TopP: 0.95, Seed: 2026})
	if err != nil {
		log.Fatal(err)
	}
	s := m.NewSession()
	turn(s, sm, []int{1, 2, 3})
	var file bytes.Buffer
	if err := s.Save(&file, sm); err != nil {
		log.Fatal(err)
	}
	uninterrupted := turn(s, sm, []int{4, 5})

	loaded, lsm, err := k3.LoadSession(m, &file)
	if err != nil {
		log.Fatal(err)
	}
	resumed := turn(loaded, lsm, []int{4, 5})
	fmt.Println(fmt.Sprint(uninterrupted) == fmt.Sprint(resumed), loaded.Len())
	// Output: true 13
}

// ExampleLoadSession_refused tells a damaged state file from a cut one: every refusal matches
// ErrState, and its *StateError says why and at which byte.
func ExampleLoadSession_refused() {
	m, done := tinyModel(5)
	defer done()
	s := m.NewSession()
	if err := s.Prefill(context.Background(), []int{1, 2, 3}); err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	if err := s.Save(&file, nil); err != nil {
		log.Fatal(err)
	}
	damaged := bytes.Clone(file.Bytes())
	damaged[len(damaged)/2] ^= 1

	for _, b := range [][]byte{damaged, file.Bytes()[:100]} {
		_, _, err := k3.LoadSession(m, bytes.NewReader(b))
		if se, ok := errors.AsType[*k3.StateError](err); ok && se.Reason == k3.StateBadChecksum {
			fmt.Println("corrupted: recompute from the conversation's ids")
			continue
		}
		fmt.Println(errors.Is(err, k3.ErrState), err)
	}
	// Output:
	// corrupted: recompute from the conversation's ids
	// true k3: state file is truncated at byte 100
}

// tinyCheckpoint synthesizes the tiny geometry for seed (random weights, with a tokenizer) into
// a new temporary directory; remove deletes it.
func tinyCheckpoint(seed int64) (dir string, remove func()) {
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	dir = filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", seed); err != nil {
		os.RemoveAll(tmp)
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(tmp) }
}

// tinyModel opens a tinyCheckpoint with opts; done closes the model and removes the checkpoint.
func tinyModel(seed int64, opts ...k3.Option) (m *k3.Model, done func()) {
	dir, remove := tinyCheckpoint(seed)
	m, err := k3.Open(dir, opts...)
	if err != nil {
		remove()
		log.Fatal(err)
	}
	return m, func() {
		m.Close()
		remove()
	}
}
