package drive_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/modeltest"
)

func registry(t testing.TB) *model.Registry {
	r, err := model.NewRegistry(drive.Model())
	require.NoError(t, err)
	return r
}

func nodes(t testing.TB, d *modeltest.Doc) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range d.State(oplog.ScopeGlobal).(map[string]any)["nodes"].([]any) {
		m := n.(map[string]any)
		p, _ := m["parent"].(string)
		out[m["id"].(string)] = m["kind"].(string) + ":" + m["name"].(string) + "@" + p
	}
	return out
}

func expectNodes(want map[string]string) func(testing.TB, *modeltest.Doc) {
	return func(t testing.TB, d *modeltest.Doc) { require.Equal(t, want, nodes(t, d)) }
}

func TestDriveActions(t *testing.T) {
	t.Parallel()
	d := modeltest.Created(t, registry(t), drive.DocumentType)
	modeltest.Run(t, d, []modeltest.Case{
		{Name: "name", Type: drive.ActionSetDriveName, Input: map[string]any{"name": "Team"},
			Check: func(t testing.TB, d *modeltest.Doc) {
				require.Equal(t, "Team", d.State(oplog.ScopeGlobal).(map[string]any)["name"])
			}},
		{Name: "folder", Type: drive.ActionAddFolder, Input: map[string]any{"id": "f1", "name": "Specs"},
			Check: expectNodes(map[string]string{"f1": "folder:Specs@"})},
		{Name: "folder without name", Type: drive.ActionAddFolder, Input: map[string]any{"id": "f2"},
			ErrIs: model.NameInvalidInput, ErrMsg: "name is required"},
		{Name: "folder without id", Type: drive.ActionAddFolder, Input: map[string]any{"name": "x"},
			ErrIs: model.NameInvalidInput, ErrMsg: "id is required"},
		{Name: "duplicate id", Type: drive.ActionAddFolder, Input: map[string]any{"id": "f1", "name": "x"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `node-exists: node "f1" already exists`},
		{Name: "missing parent", Type: drive.ActionAddFolder, Input: map[string]any{"id": "f2", "name": "x", "parentFolder": "nope"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `parent-not-found: parent folder "nope" does not exist`},
		{Name: "subfolder", Type: drive.ActionAddFolder, Input: map[string]any{"id": "f2", "name": "Drafts", "parentFolder": "f1"}},
		{Name: "file", Type: drive.ActionAddFile, Input: map[string]any{"id": "d1", "name": "plan.md", "parentFolder": "f2", "documentId": "doc-1", "documentType": "doclog/json"},
			Check: expectNodes(map[string]string{"f1": "folder:Specs@", "f2": "folder:Drafts@f1", "d1": "file:plan.md@f2"})},
		{Name: "file without document", Type: drive.ActionAddFile, Input: map[string]any{"id": "d2", "name": "x"},
			ErrIs: model.NameInvalidInput, ErrMsg: "documentId is required"},
		{Name: "file under file", Type: drive.ActionAddFile, Input: map[string]any{"id": "d2", "name": "x", "documentId": "doc-2", "parentFolder": "d1"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `parent-not-folder: parent "d1" is not a folder`},
		{Name: "rename", Type: drive.ActionRenameNode, Input: map[string]any{"id": "d1", "name": "plan-v2.md"}},
		{Name: "rename missing", Type: drive.ActionRenameNode, Input: map[string]any{"id": "zz", "name": "x"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `node-not-found: node "zz" does not exist`},
		{Name: "move into own child", Type: drive.ActionMoveNode, Input: map[string]any{"id": "f1", "parentFolder": "f2"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `cycle: cannot move "f1" under itself`},
		{Name: "move to root", Type: drive.ActionMoveNode, Input: map[string]any{"id": "d1"},
			Check: expectNodes(map[string]string{"f1": "folder:Specs@", "f2": "folder:Drafts@f1", "d1": "file:plan-v2.md@"})},
		{Name: "move back", Type: drive.ActionMoveNode, Input: map[string]any{"id": "d1", "parentFolder": "f2"}},
		{Name: "unknown field", Type: drive.ActionMoveNode, Input: map[string]any{"id": "d1", "to": "f2"},
			ErrIs: model.NameInvalidInput, ErrMsg: `unknown field "to"`},
		{Name: "delete folder deletes its subtree", Type: drive.ActionDeleteNode, Input: map[string]any{"id": "f1"},
			Check: expectNodes(map[string]string{})},
		{Name: "delete missing", Type: drive.ActionDeleteNode, Input: map[string]any{"id": "f1"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "node-not-found"},
	})
}

// Adding a file is one job of two actions: the node, and the relationship
// the indexer turns into the parent/child link.
func TestAddFileActions(t *testing.T) {
	t.Parallel()
	d := modeltest.Created(t, registry(t), drive.DocumentType)
	actions, err := drive.AddFileActions("job1", 42, drive.AddFileInput{ID: "n1", Name: "a.md", DocumentID: "child-doc"})
	require.NoError(t, err)
	require.Len(t, actions, 2)
	for _, a := range actions {
		require.NoError(t, d.ApplyAction(a))
	}
	require.Equal(t, map[string]string{"n1": "file:a.md@"}, nodes(t, d))
	info, ok := model.DocumentInfoOf(d.Stream(oplog.ScopeDocument))
	require.True(t, ok)
	require.Equal(t, []model.Relationship{{Type: model.RelationshipChild, TargetID: "child-doc"}}, info.Relationships)
	require.NotEqual(t, actions[0].ID, actions[1].ID)
	d.VerifyReplay()
}
