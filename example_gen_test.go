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
)

// ExampleSession_Save runs a two-turn conversation with a seeded sampler, saving the state
// after the first turn; the second turn from the loaded state matches an uninterrupted one.
func ExampleSession_Save() {
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", 5); err != nil {
		log.Fatal(err)
	}
	m, err := k3.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
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
	tmp, err := os.MkdirTemp("", "k3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", 5); err != nil {
		log.Fatal(err)
	}
	m, err := k3.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
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
