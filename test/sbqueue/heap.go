package sbqueue

// entryHeap is a container/heap.Interface over entries that records each
// entry's position in the heap, so that an entry can be removed from the
// middle in O(log n).
type entryHeap struct {
	items []*entry
	less  func(a, b *entry) bool
	index func(e *entry) *int
}

func (h *entryHeap) Len() int           { return len(h.items) }
func (h *entryHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

func (h *entryHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.index(h.items[i]) = i
	*h.index(h.items[j]) = j
}

func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	*h.index(e) = len(h.items)
	h.items = append(h.items, e)
}

func (h *entryHeap) Pop() any {
	n := len(h.items) - 1
	e := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	*h.index(e) = -1
	return e
}

func (h *entryHeap) peek() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}
