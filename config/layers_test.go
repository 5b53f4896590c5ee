package config

import (
	"reflect"
	"testing"
)

func TestK3LayerMap(t *testing.T) {
	c := K3()
	var wantMLA []int
	for L := 3; L <= 91; L += 4 {
		wantMLA = append(wantMLA, L)
	}
	wantMLA = append(wantMLA, 92) // the extra Gated MLA layer at the end
	if got := c.MLALayers(); !reflect.DeepEqual(got, wantMLA) {
		t.Fatalf("MLALayers = %v", got)
	}
	if c.NumMLA() != 24 || c.NumKDA() != 69 || len(c.KDALayerIndices()) != 69 {
		t.Fatalf("NumMLA %d NumKDA %d", c.NumMLA(), c.NumKDA())
	}
	isMLA := map[int]bool{}
	for _, L := range wantMLA {
		isMLA[L] = true
	}
	mlaSeen, kdaSeen := 0, 0
	for L := 0; L < 93; L++ {
		if c.IsMLA(L) != isMLA[L] || c.IsKDA(L) == isMLA[L] {
			t.Errorf("layer %d: IsMLA %v IsKDA %v", L, c.IsMLA(L), c.IsKDA(L))
		}
		if c.IsDense(L) != (L == 0) {
			t.Errorf("layer %d: IsDense %v", L, c.IsDense(L))
		}
		if c.IsBoundary(L) != (L%12 == 0) || c.Block(L) != L/12 {
			t.Errorf("layer %d: IsBoundary %v Block %d", L, c.IsBoundary(L), c.Block(L))
		}
		if c.MLASlot(L) != mlaSeen || c.KDASlot(L) != kdaSeen {
			t.Errorf("layer %d: MLASlot %d KDASlot %d, want %d %d", L, c.MLASlot(L), c.KDASlot(L), mlaSeen, kdaSeen)
		}
		if isMLA[L] {
			mlaSeen++
		} else {
			kdaSeen++
		}
	}
	if !c.IsKDA(0) || c.IsMLA(0) {
		t.Error("layer 0 must be KDA")
	}
	var boundaries []int
	for L := 0; L < 93; L++ {
		if c.IsBoundary(L) {
			boundaries = append(boundaries, L)
		}
	}
	if want := []int{0, 12, 24, 36, 48, 60, 72, 84}; !reflect.DeepEqual(boundaries, want) || c.NumBlocks() != 8 {
		t.Errorf("boundaries %v, NumBlocks %d", boundaries, c.NumBlocks())
	}
	if c.MLASlot(92) != 23 || c.MLASlot(93) != 24 || c.KDASlot(93) != 69 {
		t.Errorf("MLASlot(92) %d MLASlot(93) %d KDASlot(93) %d", c.MLASlot(92), c.MLASlot(93), c.KDASlot(93))
	}
	want := "KKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMKKKMM"
	if got := c.LayerKinds(); got != want {
		t.Errorf("LayerKinds = %s", got)
	}
}

func TestTinyLayerMap(t *testing.T) {
	c := tinyWant()
	if got := c.LayerKinds(); got != "KKKMKKKMKKKMM" {
		t.Errorf("LayerKinds = %s", got)
	}
	var boundaries, dense []int
	for L := -2; L < 16; L++ {
		if c.IsBoundary(L) {
			boundaries = append(boundaries, L)
		}
		if c.IsDense(L) {
			dense = append(dense, L)
		}
		if (L < 0 || L >= 13) && (c.IsMLA(L) || c.IsKDA(L) || c.Block(L) != -1) {
			t.Errorf("out-of-range layer %d classified", L)
		}
	}
	if !reflect.DeepEqual(boundaries, []int{0, 3, 6, 9, 12}) || !reflect.DeepEqual(dense, []int{0}) || c.NumBlocks() != 5 {
		t.Errorf("boundaries %v dense %v blocks %d", boundaries, dense, c.NumBlocks())
	}
	if got := c.KDALayerIndices(); !reflect.DeepEqual(got, []int{0, 1, 2, 4, 5, 6, 8, 9, 10}) {
		t.Errorf("KDALayerIndices = %v", got)
	}
	// The derived map matches the file's one-based kda_layers.
	for i, l := range c.KDALayerIndices() {
		if c.KDALayers[i] != l+1 {
			t.Errorf("kda_layers[%d] = %d, derived %d", i, c.KDALayers[i], l+1)
		}
	}
	slots := []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3}
	for L, s := range slots {
		if c.MLASlot(L) != s {
			t.Errorf("MLASlot(%d) = %d, want %d", L, c.MLASlot(L), s)
		}
	}
}

func TestSummary(t *testing.T) {
	if got, want := K3().Summary(), "hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA | experts 896 top16 shared2 | latent=3584"; got != want {
		t.Errorf("K3 Summary = %q", got)
	}
	if got, want := tinyWant().Summary(), "hidden=128 layers=13 vocab=256 | 4 MLA + 9 KDA | experts 8 top2 shared2 | latent=64"; got != want {
		t.Errorf("tiny Summary = %q", got)
	}
}

// The derived helpers are total: garbage in a hand-built Config must not panic.
func TestLayerMapNeverPanics(t *testing.T) {
	bad := []*Config{
		{},
		{NumLayers: -5, FullAttn: []int{-1, 0, 3}, AttnResBlock: -2},
		{NumLayers: 4, FullAttn: []int{2, 2, 9, -3}, AttnResBlock: 0, FirstDense: 99},
		{NumLayers: MaxDim * 4, FullAttn: []int{1}, AttnResBlock: 1},
	}
	for _, c := range bad {
		for _, L := range []int{-1, 0, 1, 2, 3, 100} {
			_ = c.IsMLA(L) || c.IsKDA(L) || c.IsDense(L) || c.IsBoundary(L)
			_ = c.MLASlot(L) + c.KDASlot(L) + c.Block(L)
		}
		_ = c.Summary() + c.LayerKinds()
		_ = c.MLALayers()
		_ = c.KDALayerIndices()
		_ = c.NumBlocks()
		_ = c.Validate()
	}
	c := bad[2]
	if got := c.MLALayers(); !reflect.DeepEqual(got, []int{1}) || c.LayerKinds() != "KMKK" {
		t.Errorf("dedup: %v %s", got, c.LayerKinds())
	}
}
