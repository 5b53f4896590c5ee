package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/sysmem"
)

// gb is the decimal gigabyte of the budgets.
const gb = 1e9

// listPresets prints the preset table; auto's row shows this machine's figures.
func listPresets(stdout, stderr io.Writer) int {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PRESET\tTRUNK GB\tCACHE GB\tNOTE")
	for _, p := range preset.All() {
		t, c := fmt.Sprintf("%.2f", float64(p.Trunk)/gb), fmt.Sprintf("%.2f", float64(p.Cache)/gb)
		note := p.Note
		switch p.Name {
		case preset.Floor:
			t, c = "model", "model"
		case preset.Auto:
			m, err := sysmem.Read()
			if err == nil {
				var tb, cb int64
				if tb, cb, err = preset.AutoBudgets(m); err == nil {
					t, c = fmt.Sprintf("%.2f", float64(tb)/gb), fmt.Sprintf("%.2f", float64(cb)/gb)
					note += fmt.Sprintf(" (here: %s)", m)
				}
			}
			if err != nil {
				t, c = "-", "-"
				note += fmt.Sprintf(" (here: %v)", err)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, t, c, note)
	}
	if err := tw.Flush(); err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	return exitOK
}
