package k3_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/tokenizer"
)

// Example is the one path through the library: plan a memory budget, open the model under it,
// and generate text. The checkpoint is synthesized (random weights of the tiny geometry, with a
// tokenizer), so the text means nothing, but every step is the one a real checkpoint takes.
func Example() {
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", 42); err != nil {
		log.Fatal(err)
	}

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

	enc, err := tokenizer.LoadKimi(filepath.Join(dir, "tiktoken.model"), filepath.Join(dir, "tokenizer_config.json"))
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
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", 42); err != nil {
		log.Fatal(err)
	}
	m, err := k3.Open(dir, k3.WithThreads(2))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

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
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", 1); err != nil {
		log.Fatal(err)
	}
	m, err := k3.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
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
