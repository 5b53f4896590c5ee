package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/k3-project/k3"
)

func listGeometries(stdout io.Writer) int {
	for _, g := range k3.Geometries() {
		fmt.Fprintf(stdout, "%-6s %s\n", g.Name, g.Description)
	}
	return exitOK
}

func cmdSynth(args []string, stdout, stderr io.Writer) int {
	pos, vals, err := parseArgs(args, flagSpec{"--seed": true})
	if err == nil && len(pos) != 2 {
		err = usagef("", "usage: k3 synth <geometry> <dir> [--seed N] (geometries: %s)", geometryNames())
	}
	var seed int64 = 1
	if err == nil {
		if s, ok := vals["--seed"]; ok {
			var v int
			v, err = parseInt("--seed", s, 0, math.MaxInt64)
			seed = int64(v)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
	}
	if !knownGeometry(pos[0]) {
		fmt.Fprintf(stderr, "k3: synth: unknown geometry %q (known: %s)\n", pos[0], geometryNames())
		return exitUsage
	}
	if err := k3.Synthesize(pos[1], pos[0], seed); err != nil {
		fmt.Fprintf(stderr, "k3: synth: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "wrote geometry %s (seed %d) to %s\n", pos[0], seed, pos[1])
	return exitOK
}

func geometryNames() string {
	var names []string
	for _, g := range k3.Geometries() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

func knownGeometry(name string) bool {
	for _, g := range k3.Geometries() {
		if g.Name == name {
			return true
		}
	}
	return false
}

// cmdDemo is the setup-free path of the README: synthesize the tiny geometry into a temporary
// directory and decode a few tokens from it, both ways, printing the report to stdout.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	pos, vals, err := parseArgs(args, flagSpec{"--gen": true, "--seed": true, "--keep": true, "--threads": true})
	if err == nil && len(pos) != 0 {
		err = usagef("", "demo takes no positional arguments")
	}
	gen, seed, threads := 8, 1, 0
	if err == nil {
		if s, ok := vals["--gen"]; ok {
			gen, err = parseInt("--gen", s, 0, 64)
		}
	}
	if err == nil {
		if s, ok := vals["--seed"]; ok {
			seed, err = parseInt("--seed", s, 0, math.MaxInt32)
		}
	}
	if err == nil {
		if s, ok := vals["--threads"]; ok {
			threads, err = parseInt("--threads", s, 1, 4096)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
	}
	dir := vals["--keep"]
	if dir == "" {
		tmp, err := os.MkdirTemp("", "k3-demo-*")
		if err != nil {
			fmt.Fprintf(stderr, "k3: demo: %v\n", err)
			return exitRuntime
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := k3.Synthesize(dir, "tiny", int64(seed)); err != nil {
		fmt.Fprintf(stderr, "k3: demo: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stderr, "k3: demo: synthesized geometry tiny (seed %d) in %s\n", seed, dir)
	o := &runOptions{modelDir: dir, ids: []int{1, 2, 3, 4, 5}, gen: gen, incremental: true,
		threads: threads, noStop: true, out: "-"}
	if o.threads == 0 {
		o.threads = defaultThreads()
	}
	return decode(o, stdout, stderr, nil)
}
