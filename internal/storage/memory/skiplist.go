package memory

import "math/rand/v2"

// skiplist is the key index: O(log n) expected insert, remove and seek, and
// in-order iteration along the bottom level, plus O(1) expected lookup of
// one exact key through a hash map beside the list. Levels come from a
// fixed-seed generator, so a given sequence of operations always builds the
// same list. Not safe for concurrent use; the Store's lock guards it.
type skiplist struct {
	head  skipNode
	level int // levels in use, at least 1
	rng   *rand.Rand
	// nodes maps every key in the list to its node. Invariant: it holds
	// exactly the nodes reachable along the bottom level.
	nodes map[string]*skipNode
}

type skipNode struct {
	key  string
	rec  *record
	next []*skipNode
}

const skipMaxLevel = 32

func newSkiplist() *skiplist {
	return &skiplist{
		head:  skipNode{next: make([]*skipNode, skipMaxLevel)},
		level: 1,
		rng:   rand.New(rand.NewPCG(1, 2)),
		nodes: map[string]*skipNode{},
	}
}

// randomLevel draws a level with P(level > k) = 4^-k.
func (l *skiplist) randomLevel() int {
	lvl := 1
	for lvl < skipMaxLevel && l.rng.Uint32()&3 == 0 {
		lvl++
	}
	return lvl
}

// path fills prev[i] with the last node at level i whose key is < key, and
// returns the first node at or after key (nil at the end).
func (l *skiplist) path(key string, prev *[skipMaxLevel]*skipNode) *skipNode {
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < key {
			x = x.next[i]
		}
		if prev != nil {
			prev[i] = x
		}
	}
	return x.next[0]
}

// get returns the record stored under key, or nil.
func (l *skiplist) get(key string) *record {
	if n := l.nodes[key]; n != nil {
		return n.rec
	}
	return nil
}

// seek returns the first node whose key is >= key, or nil.
func (l *skiplist) seek(key string) *skipNode { return l.path(key, nil) }

// seekAfter returns the first node whose key is > key, or nil.
func (l *skiplist) seekAfter(key string) *skipNode {
	if n := l.nodes[key]; n != nil {
		return n.next[0]
	}
	return l.path(key+"\x00", nil)
}

// first returns the smallest node, or nil when empty.
func (l *skiplist) first() *skipNode { return l.head.next[0] }

// insert adds key, which must not be present.
func (l *skiplist) insert(key string, rec *record) {
	var prev [skipMaxLevel]*skipNode
	l.path(key, &prev)
	lvl := l.randomLevel()
	for i := l.level; i < lvl; i++ {
		prev[i] = &l.head
	}
	if lvl > l.level {
		l.level = lvl
	}
	n := &skipNode{key: key, rec: rec, next: make([]*skipNode, lvl)}
	for i := 0; i < lvl; i++ {
		n.next[i] = prev[i].next[i]
		prev[i].next[i] = n
	}
	l.nodes[key] = n
}

// remove deletes key if present.
func (l *skiplist) remove(key string) {
	if _, ok := l.nodes[key]; !ok {
		return
	}
	delete(l.nodes, key)
	var prev [skipMaxLevel]*skipNode
	n := l.path(key, &prev)
	for i := 0; i < len(n.next); i++ {
		prev[i].next[i] = n.next[i]
	}
	for l.level > 1 && l.head.next[l.level-1] == nil {
		l.level--
	}
}
