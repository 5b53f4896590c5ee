package k3_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
)

// Example synthesizes the tiny geometry and decodes greedily from it, incrementally and by full
// recomputation; the two modes agree token for token (and bit for bit in their logits).
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
