package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// specialSet holds the special-token names in a byte trie for leftmost
// search.
type specialSet struct {
	names []string
	ids   []int
	nodes []trieNode
	first [256]bool // bytes that start some name
}

type trieNode struct {
	edges []trieEdge
	name  int32 // index into names of the name ending here, or -1
	count int32 // names in this subtree
	some  int32 // one name in this subtree
}

type trieEdge struct {
	b    byte
	next int32
}

func (t *specialSet) child(n int32, b byte) int32 {
	for _, e := range t.nodes[n].edges {
		if e.b == b {
			return e.next
		}
	}
	return -1
}

// newSpecialSet validates names (§10.2) and builds the trie. ranks may
// be nil when no ranked-token check is wanted.
func newSpecialSet(names []string, ids []int, ranks *Ranks) (*specialSet, error) {
	t := &specialSet{names: names, ids: ids, nodes: []trieNode{{name: -1}}}
	for i, name := range names {
		if name == "" {
			return nil, &SpecialsError{fmt.Sprintf("id %d has an empty name", ids[i])}
		}
		if !utf8.ValidString(name) {
			return nil, &SpecialsError{fmt.Sprintf("id %d: name %q is not valid UTF-8", ids[i], name)}
		}
		if ranks != nil {
			if r, ok := ranks.lookup(name); ok {
				return nil, &SpecialsError{fmt.Sprintf("id %d: name %q is also ranked token %d", ids[i], name, r)}
			}
		}
		n := int32(0)
		for j := 0; j < len(name); j++ {
			t.nodes[n].count++
			c := t.child(n, name[j])
			if c < 0 {
				c = int32(len(t.nodes))
				t.nodes = append(t.nodes, trieNode{name: -1, some: int32(i)})
				t.nodes[n].edges = append(t.nodes[n].edges, trieEdge{name[j], c})
			}
			n = c
		}
		t.nodes[n].count++
		if t.nodes[n].name >= 0 {
			other := t.nodes[n].name
			return nil, &SpecialsError{fmt.Sprintf("ids %d and %d have the same name %q", ids[other], ids[i], name)}
		}
		t.nodes[n].name = int32(i)
		t.first[name[0]] = true
	}
	// Overlaps: for every name a and start p in a, walk a[p:] down the trie.
	// Reaching another name's end means that name occurs inside a; consuming
	// a[p:] (p ≥ 1) at a node that leads to a name other than a means a
	// proper suffix of a is a proper prefix of it. Either would make the
	// leftmost scan depend on the order names are tried.
	for i, a := range names {
		for p := 0; p < len(a); p++ {
			n := int32(0)
			q := p
			for ; q < len(a); q++ {
				n = t.child(n, a[q])
				if n < 0 {
					break
				}
				if m := t.nodes[n].name; m >= 0 && !(p == 0 && int(m) == i) {
					return nil, &SpecialsError{fmt.Sprintf("name %q (id %d) occurs inside %q (id %d)", names[m], ids[m], a, ids[i])}
				}
			}
			if n >= 0 && q == len(a) && p > 0 {
				nd := t.nodes[n]
				if nd.count > 1 || int(nd.some) != i {
					other := nd.some
					if int(other) == i {
						other = t.otherBelow(n, int32(i))
					}
					return nil, &SpecialsError{fmt.Sprintf("the end %q of %q (id %d) is the start of %q (id %d)", a[p:], a, ids[i], names[other], ids[other])}
				}
			}
		}
	}
	return t, nil
}

// otherBelow returns a name in n's subtree other than not.
func (t *specialSet) otherBelow(n, not int32) int32 {
	if m := t.nodes[n].name; m >= 0 && m != not {
		return m
	}
	for _, e := range t.nodes[n].edges {
		if t.nodes[e.next].count > 0 {
			if m := t.otherBelow(e.next, not); m >= 0 {
				return m
			}
		}
	}
	return -1
}

// find returns the leftmost occurrence at or after from of any name, as
// (offset, name index), or (-1, -1).
func (t *specialSet) find(s string, from int) (int, int) {
	if t == nil || len(t.names) == 0 {
		return -1, -1
	}
	for p := from; p < len(s); p++ {
		if !t.first[s[p]] {
			continue
		}
		n := int32(0)
		for q := p; q < len(s); q++ {
			n = t.child(n, s[q])
			if n < 0 {
				break
			}
			if m := t.nodes[n].name; m >= 0 {
				return p, int(m)
			}
		}
	}
	return -1, -1
}
