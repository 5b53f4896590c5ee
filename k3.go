package k3

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/layout"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

// Option configures Open and PlanFor.
type Option func(*options) error

type options struct {
	threads     int
	trunkBudget int64 // 0: map every shard
	ring        int
	slotBytes   int64
	packedDir   string
	packedSrc   trunk.Source   // where the pack's lossless12 matrices are read from
	open        storage.Opener // nil: storage.Open
	noVerify    bool
	tracer      Tracer

	cacheSet    bool // WithCacheBudget given (0 is a valid budget)
	cacheBudget int64
	cachePolicy cache.PolicyName
	prefetch    int

	configPath string // "" : dir/config.json
	layers     int    // 0: all
	integrity  checkpoint.CheckOptions
}

// WithThreads sets the number of goroutines used for mat-vec rows, heads and positions (n ≥ 1;
// default GOMAXPROCS). Results are bit-identical for every value (§5.6). With n > 1 the
// model keeps n−1 helper goroutines for its dense mat-vecs; after each call they poll for the
// next one for 100 µs before they park, which spares a thread wake-up per call (Close stops
// them).
func WithThreads(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("k3: WithThreads(%d): need at least 1", n)
		}
		o.threads = n
		return nil
	}
}

// WithTrunkBudget holds the dense weights (every layer's tensors except routed experts, the
// embedding table and the output head) in at most bytes of RAM: the largest items are pinned,
// the rest stream from disk through a small ring of slots each token, and the embedding's rows
// are read per token. Results are bit-identical at every budget. A budget below the model's
// floor is refused with the floor in the message (trunk.ErrBudget). Without this option every
// shard is memory-mapped, which is fastest when RAM holds the whole trunk.
func WithTrunkBudget(bytes int64) Option {
	return func(o *options) error {
		if bytes <= 0 {
			return fmt.Errorf("k3: WithTrunkBudget(%d): need a positive byte count", bytes)
		}
		o.trunkBudget = bytes
		return nil
	}
}

// WithTrunkRing asks for n ring slots (1 … 8, default 2) under a trunk budget. With one slot
// nothing is read ahead; with two or more a background reader fills the next pieces while the
// current one is computed on.
func WithTrunkRing(n int) Option {
	return func(o *options) error {
		if n < 1 || n > trunk.MaxRing {
			return fmt.Errorf("k3: WithTrunkRing(%d): want 1 … %d", n, trunk.MaxRing)
		}
		o.ring = n
		return nil
	}
}

// WithTrunkSlot caps a ring slot at bytes (default 64 MiB): larger tensors stream in row ranges.
// Smaller slots lower the memory floor; larger ones mean fewer, larger reads.
func WithTrunkSlot(bytes int64) Option {
	return func(o *options) error {
		if bytes <= 0 {
			return fmt.Errorf("k3: WithTrunkSlot(%d): need a positive byte count", bytes)
		}
		o.slotBytes = bytes
		return nil
	}
}

// WithPackedTrunk reads every layer's dense tensors from dir/trunk.bin (written by PackTrunk)
// instead of the checkpoint's shards, and the embedding table and output head too when the pack
// holds them (a lossless12 pack does); the shards still provide the experts and whatever the
// pack lacks. Each run is checked against its sha256 the first time it is loaded, and trunk.json
// must name this model (§3.6; trunk.ErrOtherModel otherwise). Without WithTrunkBudget the whole
// packed trunk is pinned.
//
// The matrices a pack holds in lossless12 are read from the pack or, where the format loses, from
// the checkpoint's bf16 originals: the plan (Plan.PackedSource, decided by trunk.ChooseSource
// before anything is allocated) keeps bf16 when everything is resident and there are fewer
// threads than trunk.Lossless12Threads(). One source (trunk.SourcePacked or trunk.SourceShards)
// forces the choice; the logits are the same bits either way.
func WithPackedTrunk(dir string, source ...trunk.Source) Option {
	return func(o *options) error {
		if dir == "" {
			return fmt.Errorf("k3: WithPackedTrunk: empty directory")
		}
		if len(source) > 1 {
			return fmt.Errorf("k3: WithPackedTrunk: %d sources, want at most one", len(source))
		}
		o.packedDir, o.packedSrc = dir, trunk.SourceAuto
		if len(source) == 1 {
			switch source[0] {
			case trunk.SourceAuto, trunk.SourcePacked, trunk.SourceShards:
				o.packedSrc = source[0]
			default:
				return fmt.Errorf("k3: WithPackedTrunk: source %q is not %q or %q", source[0], trunk.SourcePacked, trunk.SourceShards)
			}
		}
		return nil
	}
}

// WithoutTrunkVerify skips the first-load sha256 check of packed layers (one extra read of each
// layer per process) and, under a trunk budget, the CRC-32C comparison of every streamed piece
// with its first read (§8.6), which costs about a CPU second per 12 GB streamed. The checks of
// each weight file's identity around every pass stay (§7.7).
func WithoutTrunkVerify() Option {
	return func(o *options) error { o.noVerify = true; return nil }
}

// WithOpener replaces how weight files are opened: checkpoint shards, the packed trunk and the
// files the trunk store and the expert cache stream from (default storage.Open). A file that is
// an *os.File keeps memory-mapped shards and O_DIRECT reads; any other is read through its
// ReadAt (shard tensors as heap copies). It is the seam for exotic storage and for fault
// injection in tests. Each path is opened once more for the model's identity checks (§7.7),
// which stat that file around every forward pass (fstat for an *os.File, Stat otherwise).
func WithOpener(open storage.Opener) Option {
	return func(o *options) error {
		if open == nil {
			return fmt.Errorf("k3: WithOpener: nil opener")
		}
		o.open = open
		return nil
	}
}

// WithCacheBudget serves routed experts from a cache of at most bytes (cache.Store, §9)
// instead of memory-mapped shards: missing experts are read with aligned direct reads, and as
// many as fit are kept under the replacement policy. 0 keeps nothing: every expert a token needs
// is read into per-call scratch of TopK experts. A positive budget below one token's working set
// (TopK + 1 experts) keeps nothing either but bounds that scratch: it holds as many experts as
// the budget does (at least one; Plan.Cache.ScratchSlots), and a layer's picks are read in
// rounds (Plan.Cache.Waves), which costs time, not bits. Below one expert it is refused with the
// minimums in the message (cache.ErrBudgetTooSmall). Results are bit-identical at every budget.
//
// Without this option a checkpoint whose routed experts are stamped as entropy-coded (written by
// quant/rans Repack) is served from the cache with budget 0: the stamps select the store, which
// alone decodes them, and no memory is guessed. Plan.Cache shows it; give a budget to keep some.
func WithCacheBudget(bytes int64) Option {
	return func(o *options) error {
		if bytes < 0 {
			return fmt.Errorf("k3: WithCacheBudget(%d): negative", bytes)
		}
		o.cacheSet, o.cacheBudget = true, bytes
		return nil
	}
}

// WithCachePolicy selects the expert cache's replacement policy: "s3fifo" (default) or "lru".
func WithCachePolicy(name string) Option {
	return func(o *options) error {
		p, err := cache.ParsePolicy(name)
		if err != nil {
			return fmt.Errorf("k3: WithCachePolicy: %w", err)
		}
		o.cachePolicy = p
		return nil
	}
}

// WithExpertPrefetch turns on router lookahead with an expert cache: while layer L computes,
// layer L+1's router is applied to layer L's input and its top n experts are read in the
// background (0 turns it off, the default). Only layers whose next router is resident (mapped
// or pinned) predict, so the trunk's walk order is never disturbed. Results do not change.
func WithExpertPrefetch(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("k3: WithExpertPrefetch(%d): negative", n)
		}
		o.prefetch = n
		return nil
	}
}

// WithConfigFile reads the model configuration from path instead of config.json in the
// checkpoint directory.
func WithConfigFile(path string) Option {
	return func(o *options) error {
		if path == "" {
			return fmt.Errorf("k3: WithConfigFile: empty path")
		}
		o.configPath = path
		return nil
	}
}

// WithLayers runs only the first n decoder layers (1 ≤ n ≤ the configured count), then the
// output aggregation, final norm and head: a diagnostic for bisecting a checkpoint, never the
// model's real output. Tensors of the layers left out are not bound (Model.Warnings says how many
// were skipped) and Model.Layers reports n; Config keeps the configured count.
func WithLayers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("k3: WithLayers(%d): need at least 1", n)
		}
		o.layers = n
		return nil
	}
}

// WithVerify makes Open hash every model tensor whose shard declares a colibri.sha256 digest
// (§7.3) and refuse the model on the first mismatch (safetensors.ErrChecksum, naming shard and
// tensor). It reads every stamped byte once, so it is opt-in: on K3 that is terabytes.
// Integrity reports what it cost.
func WithVerify() Option {
	return func(o *options) error { o.integrity.Verify = true; return nil }
}

// WithExtraLayers lets Open accept a checkpoint holding layers beyond num_hidden_layers, for a
// caller that asked for fewer layers on purpose (the CLI's --layers N); Integrity lists them.
// Without it they are refused with a *checkpoint.ExtraLayersError.
func WithExtraLayers() Option {
	return func(o *options) error { o.integrity.ExtraLayers = true; return nil }
}

// WithTracer reports weight traffic and per-layer timings to t as they happen.
func WithTracer(t Tracer) Option {
	return func(o *options) error { o.tracer = t; return nil }
}

// Tracer receives events of a running model. Calls come from the goroutines doing the work, so
// an implementation must be safe for concurrent use and quick.
type Tracer interface {
	// ExpertRequest is called for every routed expert the MoE asks for, in request order.
	ExpertRequest(layer, expert int)
	// TrunkRead is called after every read of dense weights: the layer (or trunk.Head,
	// trunk.Embed), file offset, length and duration.
	TrunkRead(layer int, off, n int64, d time.Duration)
	// LayerDone is called after each decoder layer of a forward pass with its wall time.
	LayerDone(layer int, d time.Duration)
}

// Model is an opened, bound checkpoint. Without a trunk budget its weights are read through
// memory-mapped shards (no copy: the page cache, not the Go heap, holds them) and a Model is safe
// for concurrent use by many Sessions. Under a trunk budget the dense weights stream through one
// ring, so forward passes of different sessions take turns. Either way, the decode steps and
// prefill chunks of sessions running at the same time are gathered into shared walks over the
// weights (§4.11), each session's result bit-identical to running alone. Close must not race
// with forwards.
type Model struct {
	dir     string
	cfg     config.Config
	threads int
	ck      *safetensors.Checkpoint
	store   *trunk.Store   // nil: mapped
	pool    *parallel.Pool // persistent workers for the dense matrices' split mat-vecs (nil: one thread)
	experts *cache.Store   // nil: mapped experts
	packed  *trunk.Packed
	watch   *storage.Watch // every weight file opened, and its identity then (§7.7)
	plan    Plan
	tracer  Tracer
	weights *weights // what a forward pass asks of the storage of all of the above

	generated atomic.Int64 // tokens generated (Stats.Tokens)

	embed  quant.Matrix // [V, E]; rows gathered and widened exactly
	lmHead quant.Matrix // [V, E]
	norm   nn.Vec       // final RMSNorm gain [E], at its stored width
	outAgg *nn.AttnRes  // output_attn_res_{norm,proj}
	eps    float32
	layers []layer
	// nlayers is the number of decoder layers bound and run (WithLayers; else the configured).
	nlayers int
	skipped int // tensors of layers left out by WithLayers
	info    Info
	integ   checkpoint.Report
	mu      sync.RWMutex // guards closed against in-flight forwards
	closed  bool
	walker  walker // gathers concurrent forwards into shared walks (§4.11)
}

// layer is one bound decoder layer: its AttnRes wiring, its mixer and its FFN.
type layer struct {
	res nn.Residual
	kda *attention.KDA // exactly one of kda, mla is set
	mla *attention.MLA
	ffn ffn
}

// Open reads config.json in dir, opens the checkpoint's shards (through the index when there is
// one) and binds every tensor of the text model by its released name, checking dtypes and
// shapes (§3.3). Missing or mis-shaped tensors are all reported in one *BindError; the
// vision tower and other unknown tensors are ignored. Under a trunk budget the plan (Plan) is
// computed from the headers before anything is allocated; pinned weights are then loaded.
//
// Open computes the model's identity by content (§3.6; Integrity().Identity), which K3ST states
// carry and a packed trunk (trunk.ErrOtherModel) and a coded copy's manifest
// (rans.ErrOtherModel) must name. Every weight file is watched (§7.7): a forward pass that
// begins or ends with a file no longer what was opened fails with a *storage.ChangedError naming
// it, reports nothing and breaks the sessions it served.
func Open(dir string, opts ...Option) (*Model, error) {
	m, d, err := prepare(dir, opts, true)
	if err != nil {
		return nil, err
	}
	o := d.opts
	m.pool = parallel.NewPool(m.threads)
	if m.plan.Trunk != nil {
		to := trunk.Options{Open: o.open, NoRecheck: o.noVerify}
		if m.pool != nil { // a nil *parallel.Pool in the interface would not read as nil
			to.Runner = m.pool
		}
		if m.packed != nil && !o.noVerify {
			to.Verify = m.packed.Checksums()
		}
		if t := o.tracer; t != nil {
			to.OnRead = t.TrunkRead
		}
		if m.store, err = trunk.Open(m.plan.Trunk, d.bind.dense, to); err != nil {
			m.Close()
			return nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
	}
	if pc := m.plan.Cache; pc != nil {
		var co []cache.Option
		if o.cachePolicy != "" {
			co = append(co, cache.WithPolicy(o.cachePolicy))
		}
		if o.tracer != nil {
			co = append(co, cache.WithTracer(o.tracer))
		}
		if o.open != nil {
			co = append(co, cache.WithOpener(o.open))
		}
		c := &m.cfg
		var moeLayers []int
		for l := range m.nlayers {
			if !c.IsDense(l) {
				moeLayers = append(moeLayers, l)
			}
		}
		cc := cache.Config{Layers: moeLayers, NumExperts: c.NumExperts, TopK: c.TopK, Budget: pc.Budget,
			Shapes: &cache.Shapes{W1: [2]int{c.MoEInter, c.Latent}, W2: [2]int{c.Latent, c.MoEInter}, W3: [2]int{c.MoEInter, c.Latent}}}
		if pc.Slots == 0 { // no cache: the plan sized the read scratch, perhaps below TopK
			cc.Budget, cc.ScratchSlots = 0, pc.ScratchSlots
		}
		if m.experts, err = cache.New(m.ck, cc, co...); err != nil {
			m.Close()
			return nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
	}
	m.weights = newWeights(m.ck, m.store, m.experts, m.watch)
	b := d.bind
	b.load(m.store, m.pool)
	if err := b.err(dir); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.build(b); err != nil {
		m.Close()
		return nil, err
	}
	m.linkLookahead(o.prefetch)
	return m, nil
}

// prepared is what prepare found out before allocating anything.
type prepared struct {
	opts options
	bind *binder // the walk over the tensor table, to be loaded
}

// prepare reads the configuration and the headers and computes the plan; with identify it also
// computes the model's identity (§3.6), which a packed trunk must name.
func prepare(dir string, opts []Option, identify bool) (*Model, *prepared, error) {
	o := options{threads: runtime.GOMAXPROCS(0)}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, nil, err
		}
	}
	cfgPath := o.configPath
	if cfgPath == "" {
		cfgPath = filepath.Join(dir, "config.json")
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
	}
	if o.layers > cfg.NumLayers {
		return nil, nil, fmt.Errorf("k3: open %s: WithLayers(%d): the configuration has %d layers", dir, o.layers, cfg.NumLayers)
	}
	// Every weight file is opened through the watch, which records its identity for the checks
	// around each forward pass (§7.7).
	watch := storage.NewWatch(o.open)
	o.open = watch.Open
	// WithIncomplete lets the bind step name every absent tensor and the shard that should hold
	// it, instead of failing at the first absent shard.
	ck, err := safetensors.Open(dir, safetensors.WithIncomplete(), safetensors.WithOpener(o.open))
	if err != nil {
		watch.Close()
		return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
	}
	m := &Model{dir: dir, cfg: *cfg, threads: o.threads, ck: ck, watch: watch, eps: float32(cfg.RMSEps), tracer: o.tracer, nlayers: cfg.NumLayers}
	if o.layers > 0 {
		m.nlayers = o.layers
	}
	o.integrity.Layers = m.nlayers
	o.integrity.Identify = identify
	if m.integ, err = checkpoint.Check(dir, ck, cfg, o.integrity); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
	}
	if identify {
		// A coded copy's manifest names the model its experts were coded from (§3.6).
		if err := rans.CheckModel(dir, m.integ.Identity); err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
	}
	if !o.cacheSet {
		// Coded experts are decoded by the expert store alone: their stamps select it.
		coded, err := codedExperts(ck, cfg, m.nlayers)
		if err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
		o.cacheSet = coded
	}
	m.plan = Plan{Mapped: true, Packed: o.packedDir}
	d := &prepared{opts: o}
	if o.packedDir != "" {
		var model string
		if identify {
			model = m.integ.Identity.String()
		}
		exp := checkpoint.TrunkExpect(model)
		if m.packed, err = trunk.OpenPacked(o.packedDir, cfg.NumLayers, exp, o.open); err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
	}
	db := &binder{ck: ck, packed: m.packed, cachedExperts: o.cacheSet}
	db.walk(cfg, m.nlayers)
	if err := db.err(dir); err != nil {
		m.Close()
		return nil, nil, err
	}
	if o.trunkBudget > 0 || m.packed != nil {
		pc := trunk.PlanConfig{Budget: o.trunkBudget, Ring: o.ring, SlotBytes: o.slotBytes}
		if pc.Budget == 0 {
			pc.Budget = math.MaxInt64 / 2 // a packed trunk without a budget: pin it all
		}
		tp, err := trunk.NewPlan(db.dense, m.nlayers, withSide(pc, db.side))
		if err == nil && m.packed != nil {
			db, tp, err = m.packedSource(cfg, o, db, tp, pc)
		}
		if err != nil {
			m.Close()
			if _, ok := errors.AsType[*BindError](err); ok {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
		m.plan.Mapped, m.plan.Trunk = false, tp
	}
	d.bind = db
	m.plan.fillSession(cfg, m.nlayers, m.threads)
	if m.nlayers < cfg.NumLayers {
		m.skipped = m.integ.SkippedTensors
	}
	for _, t := range db.dense {
		m.plan.DenseBytes += t.Size
	}
	if o.cacheSet {
		if m.plan.Cache, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: layout.ExpertBytes(cfg), TopK: cfg.TopK,
			Budget: o.cacheBudget, Policy: o.cachePolicy, Prefetch: o.prefetch}); err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("k3: open %s: %w", dir, err)
		}
	}
	return m, d, nil
}

// withSide returns pc charging the side bytes of the vectors a walk binds (heldBytes): each
// walk (the pack's, the shards') loads its own.
func withSide(pc trunk.PlanConfig, side int64) trunk.PlanConfig {
	pc.SideBytes = side
	return pc
}

// packedSource decides where the packed trunk's lossless12 matrices are read from
// (trunk.ChooseSource, §8.5), records the choice and its reason in the plan, and returns the
// walk and the trunk plan of that choice: db and tp for the pack, else a walk of the
// checkpoint's shards alone and its plan under the same budget, the pack then being closed
// unread. A forced SourceShards fails as that walk fails; the automatic choice falls back to
// the pack.
func (m *Model) packedSource(cfg *config.Config, o options, db *binder, tp *trunk.Plan, pc trunk.PlanConfig) (*binder, *trunk.Plan, error) {
	var sb *binder
	var sp *trunk.Plan
	if o.packedSrc != trunk.SourcePacked && tp.Lossless12Bytes > 0 {
		sb = &binder{ck: m.ck, cachedExperts: o.cacheSet}
		sb.walk(cfg, m.nlayers)
		err := sb.err(m.dir)
		if err == nil {
			sp, err = trunk.NewPlan(sb.dense, m.nlayers, withSide(pc, sb.side))
		}
		if err != nil {
			if o.packedSrc == trunk.SourceShards {
				return nil, nil, err
			}
			sb, sp = nil, nil
		}
	}
	src, why := trunk.ChooseSource(o.packedSrc, tp, sp, m.threads, trunk.Lossless12Threads())
	if src == trunk.SourceShards && sp == nil {
		src, why = trunk.SourcePacked, "no matrix of the pack is in lossless12" // nothing to read elsewhere
	}
	m.plan.PackedSource, m.plan.PackedReason = src, why
	if src == trunk.SourcePacked {
		return db, tp, nil
	}
	err := m.packed.Close()
	m.packed = nil
	return sb, sp, err
}

// codedExperts reports whether some routed expert of the first nlayers layers has a packed
// weight stamped with a coded format (colibri.fmt metadata, quant.LoadStamps). The expert store
// checks every expert when it is built; this only decides that it is the store to build.
func codedExperts(ck *safetensors.Checkpoint, cfg *config.Config, nlayers int) (bool, error) {
	stamps, err := quant.LoadStamps(ck.Metadata())
	if err != nil || stamps.Len() == 0 {
		return false, err
	}
	for l := range nlayers {
		if cfg.IsDense(l) {
			continue
		}
		for e := range cfg.NumExperts {
			for _, w := range [...]string{"w1", "w2", "w3"} {
				name, _, ok := stamps.Lookup(layout.ExpertPrefix(l, e) + w + ".weight_packed")
				if !ok {
					continue
				}
				if f, err := quant.ParseFormat(name); err == nil && f.Coded() {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// PlanFor computes the memory plan Open would use for dir with opts, reading only the
// configuration and the shard headers: nothing is allocated or loaded. A budget below the
// floor is refused exactly as Open refuses it.
func PlanFor(dir string, opts ...Option) (Plan, error) {
	m, _, err := prepare(dir, opts, false)
	if err != nil {
		return Plan{}, err
	}
	p := m.plan
	m.Close()
	return p, nil
}

// Plan returns the memory plan the model runs under.
func (m *Model) Plan() Plan { return m.plan }

// Stats are a model's weight-traffic counters since Open.
type Stats struct {
	// Trunk is the dense-weight store's, nil for a fully mapped model. Read-ahead goes on
	// after a forward pass returns, so these may still grow until the model is closed (a
	// tracer hears of each read a moment before they count it); after Close they are final.
	Trunk *trunk.Stats
	// Cache is the expert cache's, nil when the experts are mapped.
	Cache *cache.Stats
	// Walks counts the walks that decode steps and prefill chunks ran and WalkRows the rows
	// (positions) they carried: concurrent sessions share walks (§4.11), so WalkRows/Walks is
	// the mean rows a walk served.
	Walks, WalkRows int64
	// Tokens counts the generated tokens: those Generate emitted and those Session.Next
	// returned (a caller that samples Session.Logits itself is not counted).
	Tokens int64
	// BytesPerToken is the weight bytes read from storage per generated token: the trunk
	// store's (Trunk.TotalBytes) and the expert cache's (Cache.Run.BytesRead) over Tokens, 0
	// before the first token or when nothing is read through them (mapped weights are the
	// page cache's to read, and not counted).
	BytesPerToken float64
}

// Stats returns the model's counters.
func (m *Model) Stats() Stats {
	s := Stats{Walks: m.walker.walks.Load(), WalkRows: m.walker.rows.Load(), Tokens: m.generated.Load()}
	var read int64
	if m.store != nil {
		st := m.store.Stats()
		s.Trunk = &st
		read += st.TotalBytes()
	}
	if m.experts != nil {
		st := m.experts.Stats()
		s.Cache = &st
		read += st.Run.BytesRead
	}
	if s.Tokens > 0 {
		s.BytesPerToken = float64(read) / float64(s.Tokens)
	}
	return s
}

// Close releases the shard mappings, the trunk store's memory and the worker goroutines.
// Sessions of the model fail with ErrClosed afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.pool.Close()
	var first error
	if m.store != nil {
		first = m.store.Close()
	}
	if m.experts != nil {
		if err := m.experts.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := m.packed.Close(); err != nil && first == nil {
		first = err
	}
	if err := m.ck.Close(); err != nil && first == nil {
		first = err
	}
	if err := m.watch.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Integrity returns what Open's integrity checks (checkpoint.Check) found and cost.
func (m *Model) Integrity() checkpoint.Report {
	r := m.integ
	r.ExtraLayers = slices.Clone(r.ExtraLayers)
	return r
}

// Config returns a copy of the model's configuration.
func (m *Model) Config() config.Config { return *m.cfg.Clone() }

// Layers returns the number of decoder layers the model runs: the configured count, or n with
// WithLayers(n).
func (m *Model) Layers() int { return m.nlayers }

// Warnings returns the checkpoint reader's non-fatal findings (stray shard files the index does
// not name, tolerated index disagreements), for logging.
func (m *Model) Warnings() []string {
	w := m.ck.Warnings()
	if m.nlayers < m.cfg.NumLayers {
		w = append(w, fmt.Sprintf("k3: running %d of %d layers (WithLayers): %d tensors of layers %d..%d are not used; the output is not the model's",
			m.nlayers, m.cfg.NumLayers, m.skipped, m.nlayers, m.cfg.NumLayers-1))
	}
	return w
}
