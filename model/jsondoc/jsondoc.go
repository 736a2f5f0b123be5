// Package jsondoc is the built-in doclog/json document model: a free-form
// JSON document per scope (global and local), changed by RFC 7386 JSON Merge
// Patch and RFC 6902 JSON Patch actions, so producers can use doclog without
// writing Go. See docs/models.md.
package jsondoc

import (
	"encoding/json"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// DocumentType is the type name of this model.
const DocumentType = "doclog/json"

// Action types.
const (
	ActionMergePatch = "MERGE_PATCH"
	ActionJSONPatch  = "JSON_PATCH"
)

var scopes = []string{oplog.ScopeGlobal, oplog.ScopeLocal}

// Model returns version 1 of doclog/json.
func Model() model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: DocumentType,
		ModelVersion: 1,
		Initial: map[string]func() any{
			oplog.ScopeGlobal: func() any { return map[string]any{} },
			oplog.ScopeLocal:  func() any { return map[string]any{} },
		},
		ActionList: []*model.ActionSpec{
			{
				Type: ActionMergePatch, Scopes: scopes,
				Description: "Merges the input into the state by RFC 7386: members set to null are removed, objects merge recursively, anything else replaces.",
				Input:       "any JSON value (the merge patch)",
				Decode:      DecodeMergePatch,
				Touches:     MergePatchPaths,
				Reduce: func(state any, call *model.Call) (any, error) {
					return MergePatch(state, call.Input), nil
				},
			},
			{
				Type: ActionJSONPatch, Scopes: scopes,
				Description: "Applies an RFC 6902 patch (add, remove, replace, move, copy, test) atomically: if one operation fails, none applies.",
				Input:       `[{"op": string, "path": pointer, "value"?: any, "from"?: pointer}, …]`,
				Decode: func(raw json.RawMessage) (any, error) {
					p, err := DecodePatch(raw)
					if err != nil {
						return nil, err
					}
					return p, nil
				},
				Touches: func(input any) []model.Path { return input.(Patch).Paths() },
				Reduce: func(state any, call *model.Call) (any, error) {
					return ApplyPatch(state, call.Input.(Patch))
				},
			},
		},
	})
}

// DecodeMergePatch decodes a merge patch: any JSON value.
func DecodeMergePatch(raw json.RawMessage) (any, error) {
	return model.DecodeJSON(raw)
}

// MergePatchPaths is what a merge patch touches: the path to each member it
// sets or removes (below the members whose patch is an object, which merge
// member by member), or the whole state when the patch is not an object.
func MergePatchPaths(patch any) []model.Path {
	p, ok := patch.(map[string]any)
	if !ok {
		return []model.Path{{}}
	}
	var out []model.Path
	var walk func(prefix model.Path, p map[string]any)
	walk = func(prefix model.Path, p map[string]any) {
		for k, v := range p {
			path := append(prefix[:len(prefix):len(prefix)], k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path, sub)
				continue
			}
			out = append(out, path)
		}
	}
	walk(nil, p)
	if out == nil {
		return []model.Path{} // an empty patch changes nothing
	}
	return out
}
