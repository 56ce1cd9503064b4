package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

const opPatchDocument = "patch document"

var _ idempotent.Patcher = (*Store)(nil)

// PatchDocument implements idempotent.Patcher as Cosmos DB's conditional patch
// does: atomically, it checks every condition of p.If against the stored
// document and, if all hold, applies p.Ops in order and gives the document
// a new ETag. It answers:
//
//   - 404 if the document is not there;
//   - 412 if a condition does not hold, including a condition on a field the
//     document lacks or that is not a number (Cosmos DB SQL compares
//     undefined to undefined, which the filter does not pass);
//   - 400 for more than idempotent.MaxPatchOps operations, an operation on id or
//     on the partition key path /orderId, a path whose parent is not an
//     object, an increment of a field that is not an integer, an unknown
//     operation, and a patched document Cosmos DB would refuse (see the
//     package documentation; 413 for its size).
//
// A failed patch writes nothing.
func (s *Store) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	fail := func(pr *problem) error {
		return &StatusError{Op: opPatchDocument, PartitionKey: pk, ID: id, Index: -1, StatusCode: pr.status, SubStatus: pr.subStatus, Reason: pr.reason}
	}
	if pr := checkID(id); pr != nil {
		return "", fail(pr)
	}
	if err := s.failure(OpPatch, opPatchDocument, pk, id); err != nil {
		return "", err
	}
	if len(p.Ops) == 0 || len(p.Ops) > idempotent.MaxPatchOps {
		return "", fail(badRequest("a patch has 1 to %d operations, not %d", idempotent.MaxPatchOps, len(p.Ops)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, id)
	if !ok {
		return "", fail(&problem{status: http.StatusNotFound, reason: "no such document"})
	}
	dec := json.NewDecoder(bytes.NewReader(it.Body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("memstore: patch %q id %q: the stored document does not decode: %w", pk, id, err)
	}
	for _, c := range p.If {
		field, ok := topLevel(c.Path)
		if !ok {
			return "", fail(badRequest("condition path %q is not a top-level field", c.Path))
		}
		n, isNum := doc[field].(json.Number)
		v, err := n.Int64()
		if !isNum || err != nil || v >= c.Value {
			return "", fail(&problem{status: http.StatusPreconditionFailed, reason: fmt.Sprintf("the document does not meet %s < %d", c.Path, c.Value)})
		}
	}
	for i, op := range p.Ops {
		if pr := applyPatchOp(doc, s.pkField, op); pr != nil {
			pr.reason = fmt.Sprintf("operation %d (%s %s): %s", i, op.Op, op.Path, pr.reason)
			return "", fail(pr)
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("memstore: patch %q id %q: %w", pk, id, err)
	}
	pd, err := parseDocument(s.pkField, pk, idempotent.Document{ID: id, Body: body})
	if err != nil {
		return "", err
	}
	if pd.problem != nil {
		return "", fail(pd.problem)
	}
	s.write(it, body, pd.ttl)
	s.commitLag(pk)
	return it.ETag, nil
}

// topLevel returns the field a one-segment JSON pointer names.
func topLevel(path string) (string, bool) {
	f, ok := strings.CutPrefix(path, "/")
	return f, ok && f != "" && !strings.Contains(f, "/")
}

// applyPatchOp applies op to doc, or says why Cosmos DB would refuse it;
// pkField is the field the container's partition key path names.
func applyPatchOp(doc map[string]any, pkField string, op idempotent.PatchOp) *problem {
	segs := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
	if !strings.HasPrefix(op.Path, "/") || slicesContain(segs, "") {
		return badRequest("the path is not a JSON pointer")
	}
	if len(segs) == 1 && (segs[0] == "id" || segs[0] == pkField) {
		return badRequest("id and the partition key cannot be patched")
	}
	parent := doc
	for _, s := range segs[:len(segs)-1] {
		next, ok := parent[s].(map[string]any)
		if !ok {
			return badRequest("the parent of the path is not an object")
		}
		parent = next
	}
	last := segs[len(segs)-1]
	switch op.Op {
	case idempotent.PatchSet:
		b, err := json.Marshal(op.Value)
		if err != nil {
			return badRequest("the value does not encode: %v", err)
		}
		parent[last] = json.RawMessage(b)
	case idempotent.PatchIncrement:
		by, ok := op.Value.(int64)
		if !ok {
			return badRequest("an increment takes an int64, not %T", op.Value)
		}
		cur := int64(0)
		if old, ok := parent[last]; ok {
			n, isNum := old.(json.Number)
			v, err := n.Int64()
			if !isNum || err != nil {
				return badRequest("the field to increment is not an integer")
			}
			cur = v
		}
		parent[last] = json.Number(strconv.FormatInt(cur+by, 10))
	default:
		return badRequest("unknown operation %q", op.Op)
	}
	return nil
}

func slicesContain(ss []string, v string) bool {
	for _, s := range ss {
		if s == v {
			return true
		}
	}
	return false
}
