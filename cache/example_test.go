package cache_test

import (
	"fmt"
	"log"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/safetensors"
)

// A Store over a checkpoint's routed experts, with room for 8 experts.
func Example() {
	ck, err := safetensors.Open("model-dir")
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	s, err := cache.New(ck, cache.Config{Layers: []int{1, 2, 3}, NumExperts: 896, TopK: 16,
		Budget: 32 * cache.SlotSize(17_547_264)}, cache.WithPolicy(cache.S3FIFO))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.BeginStep()
	experts, release, err := s.Experts(1, []int{4, 520, 17}, nil)
	if err != nil {
		log.Fatal(err) // an *cache.ExpertLoadError naming layer and expert
	}
	_ = experts // moe.Expert views, valid until release
	release()
	st := s.Stats()
	fmt.Println(st.Run.Requests, st.Run.Misses, st.Run.TrueHitRate)
}
