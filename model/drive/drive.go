// Package drive is the built-in doclog/drive document model: a tree of
// folders and files in the global scope, where a file node points at another
// document. Adding a file is one job with two actions, the node in the
// drive's global state and an ADD_RELATIONSHIP to the file's document in the
// drive's document scope (AddFileActions), which the indexer turns into the
// parent/child relationship. See docs/models.md.
package drive

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// DocumentType is the type name of this model.
const DocumentType = "doclog/drive"

// Action types (global scope).
const (
	ActionSetDriveName = "SET_DRIVE_NAME"
	ActionAddFolder    = "ADD_FOLDER"
	ActionAddFile      = "ADD_FILE"
	ActionRenameNode   = "RENAME_NODE"
	ActionMoveNode     = "MOVE_NODE"
	ActionDeleteNode   = "DELETE_NODE"
)

// Node kinds.
const (
	KindFolder = "folder"
	KindFile   = "file"
)

// Business rules (model.BusinessRuleViolation.Rule).
const (
	RuleNodeExists      = "node-exists"
	RuleNodeNotFound    = "node-not-found"
	RuleParentNotFound  = "parent-not-found"
	RuleParentNotFolder = "parent-not-folder"
	RuleCycle           = "cycle"
)

// MaxNameLength bounds node and drive names.
const MaxNameLength = 512

// SetDriveNameInput is the input of SET_DRIVE_NAME.
type SetDriveNameInput struct {
	Name string `json:"name"`
}

// AddFolderInput is the input of ADD_FOLDER. ParentFolder empty means the
// drive's root.
type AddFolderInput struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	ParentFolder string `json:"parentFolder,omitempty"`
}

// AddFileInput is the input of ADD_FILE: a node that points at the document
// DocumentID.
type AddFileInput struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	ParentFolder string `json:"parentFolder,omitempty"`
	DocumentID   string `json:"documentId"`
	DocumentType string `json:"documentType,omitempty"`
}

// RenameNodeInput is the input of RENAME_NODE.
type RenameNodeInput struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// MoveNodeInput is the input of MOVE_NODE. ParentFolder empty moves the node
// to the root.
type MoveNodeInput struct {
	ID           string `json:"id"`
	ParentFolder string `json:"parentFolder,omitempty"`
}

// DeleteNodeInput is the input of DELETE_NODE; deleting a folder deletes
// everything under it.
type DeleteNodeInput struct {
	ID string `json:"id"`
}

func checkName(name string, required bool) error {
	if required && name == "" {
		return model.Invalidf("name is required")
	}
	if utf8.RuneCountInString(name) > MaxNameLength {
		return model.Invalidf("name is longer than %d characters", MaxNameLength)
	}
	return nil
}

var global = []string{oplog.ScopeGlobal}

// Model returns version 1 of doclog/drive.
func Model() model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: DocumentType,
		ModelVersion: 1,
		Initial: map[string]func() any{
			oplog.ScopeGlobal: func() any { return map[string]any{"name": "", "nodes": []any{}} },
			oplog.ScopeLocal:  func() any { return map[string]any{} },
		},
		ActionList: []*model.ActionSpec{
			{
				Type: ActionSetDriveName, Scopes: global,
				Description: "Sets the drive's display name.",
				Input:       `{"name": string}`,
				Decode:      model.DecodeInput(func(in *SetDriveNameInput) error { return checkName(in.Name, false) }),
				Reduce: func(state any, call *model.Call) (any, error) {
					state.(map[string]any)["name"] = call.Input.(*SetDriveNameInput).Name
					return state, nil
				},
			},
			{
				Type: ActionAddFolder, Scopes: global,
				Description: "Adds a folder at the root or under a folder.",
				Input:       `{"id": string, "name": string, "parentFolder"?: string}`,
				Decode: model.DecodeInput(func(in *AddFolderInput) error {
					return model.FirstError(model.CheckID("id", in.ID), checkName(in.Name, true))
				}),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*AddFolderInput)
					return addNode(state, in.ID, in.ParentFolder, map[string]any{
						"id": in.ID, "kind": KindFolder, "name": in.Name, "parent": parentValue(in.ParentFolder),
					})
				},
			},
			{
				Type: ActionAddFile, Scopes: global,
				Description: "Adds a file node pointing at a document; send it with ADD_RELATIONSHIP in the same job (AddFileActions).",
				Input:       `{"id": string, "name": string, "documentId": string, "documentType"?: string, "parentFolder"?: string}`,
				Decode: model.DecodeInput(func(in *AddFileInput) error {
					return model.FirstError(model.CheckID("id", in.ID), checkName(in.Name, true), model.CheckID("documentId", in.DocumentID))
				}),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*AddFileInput)
					node := map[string]any{
						"id": in.ID, "kind": KindFile, "name": in.Name, "parent": parentValue(in.ParentFolder),
						"documentId": in.DocumentID,
					}
					if in.DocumentType != "" {
						node["documentType"] = in.DocumentType
					}
					return addNode(state, in.ID, in.ParentFolder, node)
				},
			},
			{
				Type: ActionRenameNode, Scopes: global,
				Description: "Renames a folder or file.",
				Input:       `{"id": string, "name": string}`,
				Decode: model.DecodeInput(func(in *RenameNodeInput) error {
					return model.FirstError(model.CheckID("id", in.ID), checkName(in.Name, true))
				}),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*RenameNodeInput)
					_, node := find(state, in.ID)
					if node == nil {
						return nil, model.Violation(RuleNodeNotFound, "node %q does not exist", in.ID)
					}
					node["name"] = in.Name
					return state, nil
				},
			},
			{
				Type: ActionMoveNode, Scopes: global,
				Description: "Moves a node under another folder (or to the root); a folder cannot move into itself or its descendants.",
				Input:       `{"id": string, "parentFolder"?: string}`,
				Decode:      model.DecodeInput(func(in *MoveNodeInput) error { return model.CheckID("id", in.ID) }),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*MoveNodeInput)
					_, node := find(state, in.ID)
					if node == nil {
						return nil, model.Violation(RuleNodeNotFound, "node %q does not exist", in.ID)
					}
					if err := checkParent(state, in.ParentFolder); err != nil {
						return nil, err
					}
					for p := in.ParentFolder; p != ""; {
						if p == in.ID {
							return nil, model.Violation(RuleCycle, "cannot move %q under itself", in.ID)
						}
						_, pn := find(state, p)
						p, _ = pn["parent"].(string)
					}
					node["parent"] = parentValue(in.ParentFolder)
					return state, nil
				},
			},
			{
				Type: ActionDeleteNode, Scopes: global,
				Description: "Deletes a node and, for a folder, everything under it.",
				Input:       `{"id": string}`,
				Decode:      model.DecodeInput(func(in *DeleteNodeInput) error { return model.CheckID("id", in.ID) }),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*DeleteNodeInput)
					if _, node := find(state, in.ID); node == nil {
						return nil, model.Violation(RuleNodeNotFound, "node %q does not exist", in.ID)
					}
					m := state.(map[string]any)
					nodes := m["nodes"].([]any)
					doomed := map[string]bool{in.ID: true}
					// Nodes are appended after their parent, but moves can
					// reorder that, so iterate until no new descendant turns up.
					for grew := true; grew; {
						grew = false
						for _, n := range nodes {
							nm := n.(map[string]any)
							p, _ := nm["parent"].(string)
							if id := nm["id"].(string); doomed[p] && !doomed[id] {
								doomed[id] = true
								grew = true
							}
						}
					}
					m["nodes"] = slices.DeleteFunc(nodes, func(n any) bool { return doomed[n.(map[string]any)["id"].(string)] })
					return state, nil
				},
			},
		},
	})
}

func parentValue(p string) any {
	if p == "" {
		return nil
	}
	return p
}

func find(state any, id string) (int, map[string]any) {
	nodes, _ := state.(map[string]any)["nodes"].([]any)
	for i, n := range nodes {
		if nm := n.(map[string]any); nm["id"] == id {
			return i, nm
		}
	}
	return -1, nil
}

func checkParent(state any, parent string) error {
	if parent == "" {
		return nil
	}
	_, pn := find(state, parent)
	if pn == nil {
		return model.Violation(RuleParentNotFound, "parent folder %q does not exist", parent)
	}
	if pn["kind"] != KindFolder {
		return model.Violation(RuleParentNotFolder, "parent %q is not a folder", parent)
	}
	return nil
}

func addNode(state any, id, parent string, node map[string]any) (any, error) {
	if _, n := find(state, id); n != nil {
		return nil, model.Violation(RuleNodeExists, "node %q already exists", id)
	}
	if err := checkParent(state, parent); err != nil {
		return nil, err
	}
	m := state.(map[string]any)
	nodes, _ := m["nodes"].([]any)
	m["nodes"] = append(nodes, node)
	return state, nil
}

// AddFileActions builds the two actions of an add-file job: the file node in
// the drive's global scope and the child relationship to the file's document
// in the drive's document scope. actionID prefixes both action ids, which
// must be unique.
func AddFileActions(actionID string, timestampUtcMs int64, in AddFileInput) ([]oplog.Action, error) {
	node, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	rel, err := json.Marshal(model.RelationshipInput{TargetID: in.DocumentID, Type: model.RelationshipChild})
	if err != nil {
		return nil, err
	}
	return []oplog.Action{
		{ID: actionID + ":node", Type: ActionAddFile, Scope: oplog.ScopeGlobal, TimestampUtcMs: timestampUtcMs, Input: node},
		{ID: actionID + ":link", Type: model.ActionAddRelationship, Scope: oplog.ScopeDocument, TimestampUtcMs: timestampUtcMs, Input: rel},
	}, nil
}
