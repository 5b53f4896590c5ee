package cache

// Tracer receives every demand request the Store serves, in request order
// (§9.7): one call per requested expert of Experts, not for
// prefetches or speculation. It is called under the Store's lock, so
// it must be quick and must not call back into the Store.
type Tracer interface {
	ExpertRequest(layer, expert int)
}
