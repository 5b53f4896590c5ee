// Package opfix loads the oracle operator fixtures (§13.1,
// shared/fixtures/ops/*.json) for the tests of nn, attention and moe, and
// compares results against them at the tolerance read from MANIFEST.json.
//
// It also builds the f32 matrices the layers bind in their tests (it
// imports quant, so quant's own tests cannot use it).
//
// It is for tests only (it imports testing) and must not be imported by
// library code. Fixture paths come from testkit, so a missing
// fixture directory skips (or under CI=true fails) the test.
package opfix
