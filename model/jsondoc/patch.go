package jsondoc

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/doclog/doclog/model"
)

// MergePatch applies an RFC 7386 JSON Merge Patch to target and returns the
// result. target is changed in place; patch values are moved into it, not
// copied, so the caller must not reuse patch.
func MergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = MergePatch(t[k], v)
	}
	return t
}

// Operation is one decoded RFC 6902 operation.
type Operation struct {
	Op    string
	Path  Pointer
	From  Pointer // move and copy
	Value any     // add, replace and test
}

// Patch is a decoded RFC 6902 JSON Patch.
type Patch []Operation

// Paths is what the patch touches: every operation's path and, for move
// and copy, its from (a path through an array touches the whole array).
func (p Patch) Paths() []model.Path {
	out := make([]model.Path, 0, len(p))
	for _, o := range p {
		out = append(out, model.Path(o.Path))
		if o.From != nil {
			out = append(out, model.Path(o.From))
		}
	}
	return out
}

// Pointer is a parsed RFC 6901 JSON Pointer; the empty pointer is the root.
type Pointer []string

// ParsePointer parses an RFC 6901 JSON Pointer.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("pointer %q must be empty or start with '/'", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if !strings.Contains(p, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, fmt.Errorf("pointer %q has a '~' not followed by 0 or 1", s)
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// String renders the pointer in RFC 6901 form.
func (p Pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// DecodePatch decodes and validates an RFC 6902 patch document (a JSON
// array of operation objects). Members an operation does not define are
// ignored, as the RFC requires.
func DecodePatch(raw []byte) (Patch, error) {
	v, err := model.DecodeJSON(raw)
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, model.Invalidf("a JSON Patch must be an array of operations")
	}
	out := make(Patch, 0, len(arr))
	for i, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, model.Invalidf("operation %d must be an object", i)
		}
		op, _ := m["op"].(string)
		var o Operation
		o.Op = op
		path, ok := m["path"].(string)
		if !ok {
			return nil, model.Invalidf("operation %d (%s) needs a string \"path\"", i, op)
		}
		if o.Path, err = ParsePointer(path); err != nil {
			return nil, model.Invalidf("operation %d (%s): %v", i, op, err)
		}
		switch op {
		case "add", "replace", "test":
			val, ok := m["value"]
			if !ok {
				return nil, model.Invalidf("operation %d (%s) needs a \"value\"", i, op)
			}
			o.Value = val
		case "move", "copy":
			from, ok := m["from"].(string)
			if !ok {
				return nil, model.Invalidf("operation %d (%s) needs a string \"from\"", i, op)
			}
			if o.From, err = ParsePointer(from); err != nil {
				return nil, model.Invalidf("operation %d (%s): %v", i, op, err)
			}
			if op == "move" && len(o.From) < len(o.Path) && slices.Equal(o.From, o.Path[:len(o.From)]) {
				return nil, model.Invalidf("operation %d (move): cannot move %s into its own child %s", i, o.From, o.Path)
			}
		case "remove":
		case "":
			return nil, model.Invalidf("operation %d needs an \"op\"", i)
		default:
			return nil, model.Invalidf("operation %d: unknown op %q", i, op)
		}
		out = append(out, o)
	}
	return out, nil
}

// Business rules a patch can break against the document it is applied to.
const (
	RulePathNotFound = "path-not-found"
	RuleTestFailed   = "test-failed"
)

// ErrPatch is the cause of a patch operation that failed against the state;
// ApplyPatch returns it wrapped with the operation's position.
var ErrPatch = errors.New("json patch failed")

type patchError struct {
	rule string
	msg  string
}

func (e *patchError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &patchError{rule: RulePathNotFound, msg: fmt.Sprintf(format, args...)}
}

// ApplyPatch applies the operations in order and returns the new document.
// doc is changed in place and values are moved from the patch into it. A
// patch is atomic (RFC 6902 §5): when an operation fails, doc is as it was
// before. The failure is a *model.BusinessRuleViolation naming the rule.
func ApplyPatch(doc any, patch Patch) (any, error) {
	if len(patch) > 1 || (len(patch) == 1 && patch[0].Op == "move") {
		// Operations check before they write, so a single one leaves doc
		// intact on failure; a longer patch (or a move, which removes before
		// it adds) works on a copy to stay atomic.
		doc = model.CloneJSON(doc)
	}
	for i, o := range patch {
		var err error
		doc, err = applyOp(doc, o)
		if err != nil {
			var pe *patchError
			if errors.As(err, &pe) {
				return nil, model.Violation(pe.rule, "operation %d (%s %s): %s", i, o.Op, o.Path, pe.msg)
			}
			return nil, err
		}
	}
	return doc, nil
}

func applyOp(doc any, o Operation) (any, error) {
	switch o.Op {
	case "add":
		return add(doc, o.Path, o.Value)
	case "remove":
		doc, _, err := remove(doc, o.Path)
		return doc, err
	case "replace":
		if len(o.Path) == 0 {
			return o.Value, nil
		}
		return at(doc, o.Path, func(parent any, key string) (any, error) {
			switch p := parent.(type) {
			case map[string]any:
				if _, ok := p[key]; !ok {
					return nil, notFound("member %q does not exist", key)
				}
				p[key] = o.Value
				return p, nil
			case []any:
				i, err := index(key, len(p), false)
				if err != nil {
					return nil, err
				}
				p[i] = o.Value
				return p, nil
			}
			return nil, notFound("parent is not a container")
		})
	case "move":
		if slices.Equal(o.From, o.Path) {
			_, err := get(doc, o.From)
			return doc, err
		}
		if _, err := get(doc, o.From); err != nil {
			return nil, err
		}
		if err := checkAddable(doc, o.Path, o.From); err != nil {
			return nil, err
		}
		doc, v, err := remove(doc, o.From)
		if err != nil {
			return nil, err
		}
		return add(doc, o.Path, v)
	case "copy":
		v, err := get(doc, o.From)
		if err != nil {
			return nil, err
		}
		return add(doc, o.Path, model.CloneJSON(v))
	case "test":
		v, err := get(doc, o.Path)
		if err != nil {
			return nil, err
		}
		if !model.EqualJSON(v, o.Value) {
			return nil, &patchError{rule: RuleTestFailed, msg: "value differs"}
		}
		return doc, nil
	}
	return nil, fmt.Errorf("unknown op %q", o.Op)
}

// checkAddable verifies that an add to path would succeed once from is
// removed, so that a move fails before it changes anything.
func checkAddable(doc any, path, from Pointer) error {
	if len(path) == 0 {
		return nil
	}
	parent, err := get(doc, path[:len(path)-1])
	if err != nil {
		return err
	}
	if a, ok := parent.([]any); ok {
		n := len(a)
		if len(from) == len(path) && slices.Equal(from[:len(from)-1], path[:len(path)-1]) {
			n-- // the moved element leaves this array first
		}
		_, err := index(path[len(path)-1], n, true)
		return err
	}
	if _, ok := parent.(map[string]any); !ok {
		return notFound("%s is not a container", path[:len(path)-1])
	}
	return nil
}

func add(doc any, path Pointer, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	return at(doc, path, func(parent any, key string) (any, error) {
		switch p := parent.(type) {
		case map[string]any:
			p[key] = value
			return p, nil
		case []any:
			i, err := index(key, len(p), true)
			if err != nil {
				return nil, err
			}
			return slices.Insert(p, i, value), nil
		}
		return nil, notFound("parent is not a container")
	})
}

func remove(doc any, path Pointer) (any, any, error) {
	if len(path) == 0 {
		return nil, nil, notFound("the whole document cannot be removed")
	}
	var removed any
	doc, err := at(doc, path, func(parent any, key string) (any, error) {
		switch p := parent.(type) {
		case map[string]any:
			v, ok := p[key]
			if !ok {
				return nil, notFound("member %q does not exist", key)
			}
			removed = v
			delete(p, key)
			return p, nil
		case []any:
			i, err := index(key, len(p), false)
			if err != nil {
				return nil, err
			}
			removed = p[i]
			return slices.Delete(p, i, i+1), nil
		}
		return nil, notFound("parent is not a container")
	})
	return doc, removed, err
}

func get(doc any, path Pointer) (any, error) {
	cur := doc
	for _, key := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[key]
			if !ok {
				return nil, notFound("member %q does not exist", key)
			}
			cur = v
		case []any:
			i, err := index(key, len(c), false)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, notFound("cannot step into a %s with %q", kind(cur), key)
		}
	}
	return cur, nil
}

// at walks to the parent of path's last token and lets fn change it; fn
// returns the parent's new value (an array may be reallocated), which is
// stored back into its own parent on the way up.
func at(node any, path Pointer, fn func(parent any, key string) (any, error)) (any, error) {
	if len(path) == 1 {
		return fn(node, path[0])
	}
	key := path[0]
	switch c := node.(type) {
	case map[string]any:
		child, ok := c[key]
		if !ok {
			return nil, notFound("member %q does not exist", key)
		}
		nc, err := at(child, path[1:], fn)
		if err != nil {
			return nil, err
		}
		c[key] = nc
		return c, nil
	case []any:
		i, err := index(key, len(c), false)
		if err != nil {
			return nil, err
		}
		nc, err := at(c[i], path[1:], fn)
		if err != nil {
			return nil, err
		}
		c[i] = nc
		return c, nil
	}
	return nil, notFound("cannot step into a %s with %q", kind(node), key)
}

// index parses an array index token: decimal without leading zeros, below n
// (or equal to n, or "-", when adding).
func index(tok string, n int, adding bool) (int, error) {
	if tok == "-" {
		if adding {
			return n, nil
		}
		return 0, notFound("\"-\" names no existing element")
	}
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, notFound("%q is not an array index", tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, notFound("%q is not an array index", tok)
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i > n || (i == n && !adding) {
		return 0, notFound("index %s is out of bounds (length %d)", tok, n)
	}
	return i, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}
