package jsondoc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/modeltest"
)

func js(t testing.TB, s string) any {
	t.Helper()
	v, err := model.DecodeJSON([]byte(s))
	require.NoError(t, err)
	return v
}

// RFC 7386 Appendix A.
func TestMergePatchRFC7386(t *testing.T) {
	t.Parallel()
	cases := [][3]string{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		got := jsondoc.MergePatch(js(t, c[0]), js(t, c[1]))
		require.True(t, model.EqualJSON(js(t, c[2]), got), "%s + %s = %v", c[0], c[1], got)
	}
}

// RFC 6902 Appendix A (A.13, a document with a duplicate member, has no
// meaning once parsed and is left out).
func TestJSONPatchRFC6902(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc, patch, want, err string
	}{
		{"A.1", `{"foo":"bar"}`, `[{"op":"add","path":"/baz","value":"qux"}]`, `{"baz":"qux","foo":"bar"}`, ""},
		{"A.2", `{"foo":["bar","baz"]}`, `[{"op":"add","path":"/foo/1","value":"qux"}]`, `{"foo":["bar","qux","baz"]}`, ""},
		{"A.3", `{"baz":"qux","foo":"bar"}`, `[{"op":"remove","path":"/baz"}]`, `{"foo":"bar"}`, ""},
		{"A.4", `{"foo":["bar","qux","baz"]}`, `[{"op":"remove","path":"/foo/1"}]`, `{"foo":["bar","baz"]}`, ""},
		{"A.5", `{"baz":"qux","foo":"bar"}`, `[{"op":"replace","path":"/baz","value":"boo"}]`, `{"baz":"boo","foo":"bar"}`, ""},
		{"A.6", `{"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}`, `[{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]`,
			`{"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}`, ""},
		{"A.7", `{"foo":["all","grass","cows","eat"]}`, `[{"op":"move","from":"/foo/1","path":"/foo/3"}]`, `{"foo":["all","cows","eat","grass"]}`, ""},
		{"A.8", `{"baz":"qux","foo":["a",2,"c"]}`, `[{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]`,
			`{"baz":"qux","foo":["a",2,"c"]}`, ""},
		{"A.9", `{"baz":"qux"}`, `[{"op":"test","path":"/baz","value":"bar"}]`, "", "test-failed"},
		{"A.10", `{"foo":"bar"}`, `[{"op":"add","path":"/child","value":{"grandchild":{}}}]`, `{"foo":"bar","child":{"grandchild":{}}}`, ""},
		{"A.11", `{"foo":"bar"}`, `[{"op":"add","path":"/baz","value":"qux","xyz":123}]`, `{"foo":"bar","baz":"qux"}`, ""},
		{"A.12", `{"foo":"bar"}`, `[{"op":"add","path":"/baz/bat","value":"qux"}]`, "", "path-not-found"},
		{"A.14", `{"/":9,"~1":10}`, `[{"op":"test","path":"/~01","value":10}]`, `{"/":9,"~1":10}`, ""},
		{"A.15", `{"/":9,"~1":10}`, `[{"op":"test","path":"/~01","value":"10"}]`, "", "test-failed"},
		{"A.16", `{"foo":["bar"]}`, `[{"op":"add","path":"/foo/-","value":["abc","def"]}]`, `{"foo":["bar",["abc","def"]]}`, ""},
		// Beyond the appendix.
		{"copy", `{"a":{"b":1}}`, `[{"op":"copy","from":"/a","path":"/c"},{"op":"replace","path":"/c/b","value":2}]`, `{"a":{"b":1},"c":{"b":2}}`, ""},
		{"replace root", `{"a":1}`, `[{"op":"replace","path":"","value":[1]}]`, `[1]`, ""},
		{"remove root", `{"a":1}`, `[{"op":"remove","path":""}]`, "", "path-not-found"},
		{"leading zero", `{"a":[1,2]}`, `[{"op":"remove","path":"/a/01"}]`, "", "not an array index"},
		{"out of bounds", `{"a":[1,2]}`, `[{"op":"add","path":"/a/3","value":0}]`, "", "out of bounds"},
		{"atomic", `{"a":1}`, `[{"op":"add","path":"/b","value":2},{"op":"test","path":"/a","value":0}]`, "", "test-failed"},
		{"move into array end", `{"a":[1,2,3]}`, `[{"op":"move","from":"/a/0","path":"/a/-"}]`, `{"a":[2,3,1]}`, ""},
		{"move past end", `{"a":[1,2,3]}`, `[{"op":"move","from":"/a/0","path":"/a/3"}]`, "", "out of bounds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := jsondoc.DecodePatch([]byte(c.patch))
			require.NoError(t, err)
			doc := js(t, c.doc)
			orig := model.CloneJSON(doc)
			got, err := jsondoc.ApplyPatch(doc, p)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, model.NameBusinessRuleViolation, model.ErrorName(err))
				require.True(t, model.EqualJSON(orig, doc), "a failed patch must leave the document as it was")
				return
			}
			require.NoError(t, err)
			require.True(t, model.EqualJSON(js(t, c.want), got), "got %v", got)
		})
	}
}

func TestDecodePatchRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"op":"add"}`:                              "must be an array of operations",
		`[1]`:                                       "operation 0 must be an object",
		`[{"path":"/a"}]`:                           `operation 0 needs an "op"`,
		`[{"op":"jump","path":"/a"}]`:               `unknown op "jump"`,
		`[{"op":"add","value":1}]`:                  `needs a string "path"`,
		`[{"op":"add","path":"a","value":1}]`:       "must be empty or start with '/'",
		`[{"op":"add","path":"/a~2","value":1}]`:    "'~' not followed by 0 or 1",
		`[{"op":"add","path":"/a"}]`:                `needs a "value"`,
		`[{"op":"copy","path":"/a"}]`:               `needs a string "from"`,
		`[{"op":"move","from":"/a","path":"/a/b"}]`: "into its own child",
		`[`: "malformed JSON",
		``:  "a JSON value is required",
	}
	for in, msg := range cases {
		_, err := jsondoc.DecodePatch([]byte(in))
		require.ErrorContains(t, err, msg, in)
		require.Equal(t, model.NameInvalidInput, model.ErrorName(err), in)
	}
}

func TestPointerRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := jsondoc.ParsePointer("/a~1b/c~0d/")
	require.NoError(t, err)
	require.Equal(t, jsondoc.Pointer{"a/b", "c~d", ""}, p)
	require.Equal(t, "/a~1b/c~0d/", p.String())
}

func TestModelActions(t *testing.T) {
	t.Parallel()
	r, err := model.NewRegistry(jsondoc.Model())
	require.NoError(t, err)
	d := modeltest.Created(t, r, jsondoc.DocumentType)
	state := func(scope, want string) func(testing.TB, *modeltest.Doc) {
		return func(t testing.TB, d *modeltest.Doc) {
			require.True(t, model.EqualJSON(js(t, want), d.State(scope)), "%s: %v", scope, d.State(scope))
		}
	}
	modeltest.Run(t, d, []modeltest.Case{
		{Name: "merge", Type: jsondoc.ActionMergePatch, Input: json.RawMessage(`{"title":"Plan","tags":["a"]}`),
			Check: state(oplog.ScopeGlobal, `{"title":"Plan","tags":["a"]}`)},
		{Name: "merge local", Scope: oplog.ScopeLocal, Type: jsondoc.ActionMergePatch, Input: json.RawMessage(`{"draft":true}`),
			Check: state(oplog.ScopeLocal, `{"draft":true}`)},
		{Name: "merge removes", Type: jsondoc.ActionMergePatch, Input: json.RawMessage(`{"tags":null}`),
			Check: state(oplog.ScopeGlobal, `{"title":"Plan"}`)},
		{Name: "merge without input", Type: jsondoc.ActionMergePatch, ErrIs: model.NameInvalidInput, ErrMsg: "a JSON value is required"},
		{Name: "merge malformed", Type: jsondoc.ActionMergePatch, Input: json.RawMessage(`{"a":`), ErrIs: model.NameInvalidInput, ErrMsg: "malformed JSON"},
		{Name: "patch", Type: jsondoc.ActionJSONPatch, Input: json.RawMessage(`[{"op":"add","path":"/n","value":1.5e-7}]`),
			Check: state(oplog.ScopeGlobal, `{"title":"Plan","n":1.5e-7}`)},
		{Name: "patch test fails", Type: jsondoc.ActionJSONPatch, Input: json.RawMessage(`[{"op":"remove","path":"/n"},{"op":"test","path":"/title","value":"x"}]`),
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "test-failed: operation 1 (test /title): value differs"},
		{Name: "patch missing path", Type: jsondoc.ActionJSONPatch, Input: json.RawMessage(`[{"op":"remove","path":"/zzz"}]`),
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `path-not-found: operation 0 (remove /zzz): member "zzz" does not exist`},
		{Name: "patch not an array", Type: jsondoc.ActionJSONPatch, Input: json.RawMessage(`{}`),
			ErrIs: model.NameInvalidInput, ErrMsg: "must be an array of operations"},
		{Name: "patch root", Scope: oplog.ScopeLocal, Type: jsondoc.ActionJSONPatch, Input: json.RawMessage(`[{"op":"replace","path":"","value":null}]`),
			Check: state(oplog.ScopeLocal, `null`)},
		{Name: "merge into null root", Scope: oplog.ScopeLocal, Type: jsondoc.ActionMergePatch, Input: json.RawMessage(`{"x":1}`),
			Check: state(oplog.ScopeLocal, `{"x":1}`)},
		{Name: "unknown action", Type: "SET", Input: json.RawMessage(`{}`), ErrIs: model.NameUnknownActionType, ErrMsg: `"SET"`},
	})
}

// Fuzz: a decoded patch applies without panicking; a failed patch leaves the
// document as it was; a successful one yields a state with a canonical form,
// and applying the same patch to a copy of the input gives the same result.
func FuzzJSONPatch(f *testing.F) {
	f.Add(`{"a":[1,2,{"b":null}],"c":"d"}`, `[{"op":"add","path":"/a/1","value":{"x":1}}]`)
	f.Add(`{"a":[1,2,3]}`, `[{"op":"move","from":"/a/0","path":"/a/-"},{"op":"copy","from":"/a","path":"/b"}]`)
	f.Add(`{"foo":{"bar":1}}`, `[{"op":"test","path":"/foo/bar","value":1},{"op":"remove","path":"/foo"}]`)
	f.Add(`[]`, `[{"op":"replace","path":"","value":{"~1":[]}},{"op":"add","path":"/~01/-","value":2}]`)
	f.Add(`{"a":{"b":{}}}`, `[{"op":"move","from":"/a","path":"/a/b/c"}]`)
	f.Fuzz(func(t *testing.T, docJSON, patchJSON string) {
		doc, err := model.DecodeJSON([]byte(docJSON))
		if err != nil {
			return
		}
		p, err := jsondoc.DecodePatch([]byte(patchJSON))
		if err != nil {
			require.Equal(t, model.NameInvalidInput, model.ErrorName(err))
			return
		}
		orig := model.CloneJSON(doc)
		p2, err := jsondoc.DecodePatch([]byte(patchJSON))
		require.NoError(t, err)
		got, err := jsondoc.ApplyPatch(doc, p)
		if err != nil {
			require.Equal(t, model.NameBusinessRuleViolation, model.ErrorName(err))
			require.True(t, model.EqualJSON(orig, doc), "failed patch changed the document")
			return
		}
		_, err = model.Canonical(got)
		require.NoError(t, err)
		again, err := jsondoc.ApplyPatch(orig, p2)
		require.NoError(t, err)
		require.True(t, model.EqualJSON(got, again))
	})
}

// Fuzz: merging never fails, is idempotent (RFC 7386 patches are) and keeps
// a canonical form.
func FuzzMergePatch(f *testing.F) {
	f.Add(`{"a":"b","c":{"d":1}}`, `{"a":null,"c":{"e":[1]}}`)
	f.Add(`[1,2]`, `{"a":{"bb":{"ccc":null}}}`)
	f.Add(`{"e":null}`, `"x"`)
	f.Fuzz(func(t *testing.T, targetJSON, patchJSON string) {
		target, err := model.DecodeJSON([]byte(targetJSON))
		if err != nil {
			return
		}
		patch, err := jsondoc.DecodeMergePatch([]byte(patchJSON))
		if err != nil {
			require.Equal(t, model.NameInvalidInput, model.ErrorName(err))
			return
		}
		once := jsondoc.MergePatch(target, model.CloneJSON(patch))
		onceCopy := model.CloneJSON(once)
		twice := jsondoc.MergePatch(once, patch)
		require.True(t, model.EqualJSON(onceCopy, twice), "merge patch must be idempotent")
		_, err = model.Canonical(twice)
		require.NoError(t, err)
	})
}
