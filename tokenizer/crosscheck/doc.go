// Package crosscheck holds no code: its tests run package tokenizer against
// github.com/pkoukk/tiktoken-go on the tokenizer fixtures. It is a module of
// its own so that tiktoken-go and its dependencies (regexp2, uuid) stay out
// of the k3 module's graph, and with it out of every program that imports
// k3. Run its tests from this directory: go test -bench . ./...
package crosscheck
