package safetensors

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
)

// k3Tensors lists the released K3 checkpoint's tensors (§3.3) with
// their released dtypes and shapes, in the released order: embed, then each
// layer's trunk (sorted by name) followed by its 896 experts, then the
// model-level tail and 168 vision-tower tensors, which the text model ignores
// but the index must still hold.
func k3Tensors() []WriteTensor {
	const (
		E, V, P, D, K, H      = 7168, 163840, 12288, 128, 4, 96
		Rq, Rkv, dq, dr, dv   = 1536, 512, 192, 64, 128
		NE, L, I, SI, DI, dnv = 896, 3584, 3072, 6144, 33792, 256
		Hm                    = 96
	)
	M := "language_model.model."
	var out []WriteTensor
	add := func(name string, dt DType, shape ...int64) {
		out = append(out, WriteTensor{Name: name, DType: dt, Shape: shape})
	}
	add(M+"embed_tokens.weight", BF16, V, E)
	isMLA := func(l int) bool { return l == 92 || (l >= 3 && l <= 91 && (l-3)%4 == 0) }
	for l := 0; l < 93; l++ {
		p := M + "layers." + strconv.Itoa(l) + "."
		start := len(out)
		for _, n := range []string{"input_layernorm.weight", "post_attention_layernorm.weight", "self_attention_res_norm.weight", "mlp_res_norm.weight"} {
			add(p+n, BF16, E)
		}
		add(p+"self_attention_res_proj.weight", BF16, 1, E)
		add(p+"mlp_res_proj.weight", BF16, 1, E)
		a := p + "self_attn."
		if isMLA(l) {
			add(a+"q_a_proj.weight", BF16, Rq, E)
			add(a+"q_a_layernorm.weight", BF16, Rq)
			add(a+"q_b_proj.weight", BF16, Hm*dq, Rq)
			add(a+"kv_a_proj_with_mqa.weight", BF16, Rkv+dr, E)
			add(a+"kv_a_layernorm.weight", BF16, Rkv)
			add(a+"kv_b_proj.weight", BF16, Hm*dnv, Rkv)
			add(a+"o_proj.weight", BF16, E, Hm*dv)
			add(a+"g_proj.weight", BF16, Hm*dv, E)
		} else {
			for _, n := range []string{"q_proj", "k_proj", "v_proj", "g_proj"} {
				add(a+n+".weight", BF16, P, E)
			}
			add(a+"o_proj.weight", BF16, E, P)
			for _, n := range []string{"q_conv1d", "k_conv1d", "v_conv1d"} {
				add(a+n+".weight", F32, P, 1, K)
			}
			add(a+"f_a_proj.weight", BF16, D, E)
			add(a+"f_b_proj.weight", BF16, P, D)
			add(a+"b_proj.weight", BF16, H, E)
			add(a+"A_log", F32, D)
			add(a+"dt_bias", F32, P)
			add(a+"o_norm.weight", F32, D)
		}
		if l == 0 {
			add(p+"mlp.gate_proj.weight", BF16, DI, E)
			add(p+"mlp.up_proj.weight", BF16, DI, E)
			add(p+"mlp.down_proj.weight", BF16, E, DI)
		} else {
			m := p + "block_sparse_moe."
			add(m+"gate.weight", BF16, NE, E)
			add(m+"gate.e_score_correction_bias", F32, NE)
			add(m+"routed_expert_down_proj.weight", BF16, L, E)
			add(m+"routed_expert_up_proj.weight", BF16, E, L)
			add(m+"routed_expert_norm.weight", BF16, L)
			add(m+"shared_experts.gate_proj.weight", BF16, SI, E)
			add(m+"shared_experts.up_proj.weight", BF16, SI, E)
			add(m+"shared_experts.down_proj.weight", BF16, E, SI)
		}
		trunk := out[start:]
		slices.SortFunc(trunk, func(x, y WriteTensor) int {
			switch {
			case x.Name < y.Name:
				return -1
			case x.Name > y.Name:
				return 1
			}
			return 0
		})
		if l == 0 {
			continue
		}
		for e := 0; e < NE; e++ {
			x := p + "block_sparse_moe.experts." + strconv.Itoa(e) + "."
			add(x+"w1.weight_packed", U8, I, L/2)
			add(x+"w1.weight_scale", U8, I, L/32)
			add(x+"w2.weight_packed", U8, L, I/2)
			add(x+"w2.weight_scale", U8, L, I/32)
			add(x+"w3.weight_packed", U8, I, L/2)
			add(x+"w3.weight_scale", U8, I, L/32)
		}
	}
	add(M+"norm.weight", BF16, E)
	add(M+"output_attn_res_norm.weight", BF16, E)
	add(M+"output_attn_res_proj.weight", BF16, 1, E)
	add("language_model.lm_head.weight", BF16, V, E)
	// Vision tower stand-ins: 27 blocks of 6 tensors plus 6 others = 168.
	const vw = 1152
	for b := 0; b < 27; b++ {
		v := "vision_tower.encoder.blocks." + strconv.Itoa(b) + "."
		add(v+"attn.qkv.weight", BF16, 3*vw, vw)
		add(v+"attn.proj.weight", BF16, vw, vw)
		add(v+"mlp.fc1.weight", BF16, 4304, vw)
		add(v+"mlp.fc2.weight", BF16, vw, 4304)
		add(v+"norm0.weight", BF16, vw)
		add(v+"norm1.weight", BF16, vw)
	}
	add("vision_tower.patch_embed.proj.weight", BF16, vw, 3, 14, 14)
	add("vision_tower.patch_embed.pos_emb.weight", BF16, 64, 64, vw)
	add("vision_tower.encoder.final_layernorm.weight", BF16, vw)
	add("mm_projector.pre_norm.weight", BF16, vw)
	add("mm_projector.proj.0.weight", BF16, 4608, 4608)
	add("mm_projector.proj.2.weight", BF16, E, 4608)
	return out
}

// k3Shards cuts the tensors into 96 shards by byte position, never
// splitting a layer's trunk or an expert's six tensors.
func k3Shards(ts []WriteTensor) [][]WriteTensor {
	const n = 96
	size := func(t WriteTensor) int64 { _, nb, _ := byteSize(t.DType, t.Shape); return nb }
	var total int64
	for _, t := range ts {
		total += size(t)
	}
	shards := make([][]WriteTensor, n)
	var before int64
	cur := 0
	for i := 0; i < len(ts); {
		// A unit is an expert (6 tensors) or a run of non-expert tensors of
		// one layer (the trunk), or a single model-level tensor.
		j := i + 1
		if isExpert(ts[i].Name) {
			j = i + 6
		} else if l := layerOf(ts[i].Name); l >= 0 {
			for j < len(ts) && layerOf(ts[j].Name) == l && !isExpert(ts[j].Name) {
				j++
			}
		}
		if s := int(before * n / total); s > cur {
			cur = s
		}
		for k := i; k < j; k++ {
			shards[cur] = append(shards[cur], ts[k])
			before += size(ts[k])
		}
		i = j
	}
	return shards
}

func isExpert(name string) bool {
	return strings.Contains(name, ".block_sparse_moe.experts.")
}

func layerOf(name string) int {
	const p = "language_model.model.layers."
	if len(name) <= len(p) || name[:len(p)] != p {
		return -1
	}
	l := 0
	for _, c := range name[len(p):] {
		if c < '0' || c > '9' {
			break
		}
		l = l*10 + int(c-'0')
	}
	return l
}

const k3TensorCount = 497_220

// k3Checkpoint returns a sparse synthetic K3 checkpoint directory, creating
// it once under the OS temp dir (headers and index only occupy disk: ~140
// MB; the 1.56 TB of data are holes).
func k3Checkpoint(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "k3-safetensors-bench-v1")
	if _, err := os.Stat(filepath.Join(dir, IndexFileName)); err == nil {
		return dir
	}
	ts := k3Tensors()
	if len(ts) != k3TensorCount {
		tb.Fatalf("generator made %d tensors, want %d", len(ts), k3TensorCount)
	}
	shards := k3Shards(ts)
	for i, s := range shards {
		if len(s) == 0 {
			tb.Fatalf("shard %d empty", i)
		}
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "k3-safetensors-bench-*")
	if err != nil {
		tb.Fatal(err)
	}
	if err := WriteSharded(tmp, shards, map[string]string{"format": "pt"}); err != nil {
		os.RemoveAll(tmp)
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, err2 := os.Stat(filepath.Join(dir, IndexFileName)); err2 != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// headerBytes returns the number of dir's shards and the size of their JSON
// headers (what an open parses), from their 8-byte length prefixes.
func headerBytes(b *testing.B, dir string) (shards int, n int64) {
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, p := range names {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		var pre [8]byte
		f.ReadAt(pre[:], 0)
		f.Close()
		n += int64(binary.LittleEndian.Uint64(pre[:]))
	}
	return len(names), n
}

func BenchmarkOpenK3Index(b *testing.B) {
	dir := k3Checkpoint(b)
	shards, hdrBytes := headerBytes(b, dir)
	b.SetBytes(hdrBytes)
	// CPU time per open (all goroutines, GC included) is reported next to
	// wall time: on a shared machine it is the stable figure, and wall time
	// on an idle one is roughly CPU time over the core count.
	var cpu time.Duration
	for b.Loop() {
		// A program opens a checkpoint once, on a heap without the previous
		// open's 300 MB of garbage; collecting it outside the timer keeps
		// each iteration in that state.
		b.StopTimer()
		runtime.GC()
		cpu0 := processCPU()
		b.StartTimer()
		c, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - cpu0
		if c.Len() != k3TensorCount || len(c.Shards()) != 96 {
			b.Fatalf("%d tensors in %d shards", c.Len(), len(c.Shards()))
		}
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(shards), "shards")
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOpenK3IndexPaired times the same open alternated with a plain
// parallel read of as many bytes as the headers and index hold, so the
// parse rate is also reported as a ratio to memory bandwidth ("x-read"),
// which is stable on a shared machine where absolute times are not.
func BenchmarkOpenK3IndexPaired(b *testing.B) {
	dir := k3Checkpoint(b)
	_, n := headerBytes(b, dir)
	if st, err := os.Stat(filepath.Join(dir, IndexFileName)); err == nil {
		n += st.Size()
	}
	buf := testkit.Filled(int(n))
	testkit.Paired(b, buf, runtime.GOMAXPROCS(0), func() {
		c, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if c.Len() != k3TensorCount {
			b.Fatalf("%d tensors", c.Len())
		}
		c.Close()
	})
}

// TestK3Layout checks the synthetic generator against §3.3/§3.5 sizes,
// so the benchmark opens a faithful stand-in.
func TestK3Layout(t *testing.T) {
	ts := k3Tensors()
	if len(ts) != k3TensorCount {
		t.Fatalf("%d tensors", len(ts))
	}
	trunk := map[int]int64{}
	var experts int64
	for _, w := range ts {
		_, nb, err := byteSize(w.DType, w.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if isExpert(w.Name) {
			experts += nb
		} else if l := layerOf(w.Name); l >= 0 {
			trunk[l] += nb
		}
	}
	if experts != 1_446_456_066_048 {
		t.Errorf("expert bytes %d", experts)
	}
	var tt int64
	for _, v := range trunk {
		tt += v
	}
	if trunk[0] != 2_341_213_184 || trunk[1] != 1_267_744_256 || trunk[3] != 844_335_616 || tt != 108_811_877_376 {
		t.Errorf("trunk bytes: layer0 %d, KDA %d, MLA %d, total %d", trunk[0], trunk[1], trunk[3], tt)
	}
	shards := k3Shards(ts)
	n := 0
	for _, s := range shards {
		if len(s) == 0 {
			t.Fatal("empty shard")
		}
		n += len(s)
	}
	if n != len(ts) {
		t.Fatalf("shards hold %d", n)
	}
}

// BenchmarkParseHeaderK3Shard parses one synthetic K3 shard header (about
// 800 kB, 5,000 tensors) on one goroutine, paired with a one-goroutine read
// of the same bytes.
func BenchmarkParseHeaderK3Shard(b *testing.B) {
	dir := k3Checkpoint(b)
	f, err := os.Open(filepath.Join(dir, ShardFileName(2, 96)))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var pre [8]byte
	if err := readFull(f, pre[:], 0); err != nil {
		b.Fatal(err)
	}
	hdr := make([]byte, binary.LittleEndian.Uint64(pre[:]))
	if err := readFull(f, hdr, 8); err != nil {
		b.Fatal(err)
	}
	st, _ := f.Stat()
	dataLen := st.Size() - 8 - int64(len(hdr))
	seed := maphash.MakeSeed()
	testkit.Paired(b, hdr, 1, func() {
		if _, err := parseHeader("x", hdr, dataLen, seed, true); err != nil {
			b.Fatal(err)
		}
	})
}

// manyTensors builds shards large enough (> the 16k grain) for the
// parallel merge and index verification to run on several goroutines.
func manyTensors(shards, per int) [][]WriteTensor {
	out := make([][]WriteTensor, shards)
	for s := range out {
		for i := 0; i < per; i++ {
			out[s] = append(out[s], WriteTensor{Name: "s" + strconv.Itoa(s) + ".t" + strconv.Itoa(i), DType: U8, Shape: []int64{int64(i % 3)}, Data: make([]byte, i%3)})
		}
	}
	return out
}

func TestParallelOpen(t *testing.T) {
	shards := manyTensors(4, 10000)
	dir := t.TempDir()
	if err := WriteSharded(dir, shards, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{1, 2, 4} {
		c, err := Open(dir, WithWorkers(w))
		if err != nil {
			t.Fatal(err)
		}
		if c.Len() != 40000 || !c.HasIndex() {
			t.Fatalf("workers %d: %d tensors", w, c.Len())
		}
		for s, sh := range shards {
			for _, wt := range sh[:50] {
				tt, ok := c.Tensor(wt.Name)
				if !ok || filepath.Base(tt.File) != ShardFileName(s+1, 4) {
					t.Fatalf("%s: %v", wt.Name, tt)
				}
			}
		}
		c.Close()
	}

	// A duplicate across shards is found whatever the worker count, and
	// reported the same way.
	dup := manyTensors(4, 10000)
	dup[3][9999].Name = dup[0][5].Name
	dir2 := t.TempDir()
	for i, sh := range dup {
		if err := WriteFile(filepath.Join(dir2, ShardFileName(i+1, 4)), sh, nil); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []string
	for _, w := range []int{1, 2, 4, 2, 4} {
		_, err := Open(dir2, WithWorkers(w))
		var e *Error
		if !errors.Is(err, ErrDuplicateTensor) || !errors.As(err, &e) || e.Tensor != dup[0][5].Name {
			t.Fatalf("workers %d: %v", w, err)
		}
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Errorf("error depends on scheduling: %q vs %q", m, msgs[0])
		}
	}

	// An index with one entry pointing at the wrong shard fails the
	// parallel check and is reported by the serial pass.
	idx := filepath.Join(dir, IndexFileName)
	b, _ := os.ReadFile(idx)
	bad := strings.Replace(string(b), `"s2.t777": "`+ShardFileName(3, 4), `"s2.t777": "`+ShardFileName(2, 4), 1)
	if bad == string(b) {
		t.Fatal("edit failed")
	}
	os.WriteFile(idx, []byte(bad), 0o644)
	_, err := Open(dir, WithWorkers(2))
	var e *Error
	if !errors.Is(err, ErrIndexWrongShard) || !errors.As(err, &e) || e.Tensor != "s2.t777" {
		t.Errorf("wrong shard: %v", err)
	}
	// A duplicate weight_map key.
	bad = strings.Replace(string(b), `"s2.t777": "`+ShardFileName(3, 4)+`"`, `"s2.t778": "`+ShardFileName(3, 4)+`"`, 1)
	os.WriteFile(idx, []byte(bad), 0o644)
	if _, err := Open(dir, WithWorkers(2)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate index key: %v", err)
	}
}
