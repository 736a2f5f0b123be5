package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// stackClient is a client of the package's running stack.
func stackClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, WriteToken: writeToken, ReadToken: readToken})
	require.NoError(t, err)
	return c
}

// A create submitted twice under one Idempotency-Key is one job: the same
// job and document ids, and the log holds one CREATE_DOCUMENT and the
// patch once.
func TestSameIdempotencyKeyIsOneJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	key := "client-test-" + uuid.NewString()
	create := client.CreateDocument{DocumentType: "doclog/json", Name: "twice",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"n": 1}}}}
	first, err := c.CreateDocument(ctx, create, client.WithIdempotencyKey(key))
	require.NoError(t, err)
	second, err := c.CreateDocument(ctx, create, client.WithIdempotencyKey(key))
	require.NoError(t, err)
	require.Equal(t, first.JobID, second.JobID)
	require.Equal(t, first.DocumentID, second.DocumentID)
	require.Equal(t, key, second.IdempotencyKey)

	st, err := c.WaitJob(ctx, first.JobID)
	require.NoError(t, err)
	// Both records reached the executor before the reads below: a job
	// behind them on the same partition is committed after both.
	later, err := c.SubmitJob(ctx, client.Job{DocumentID: first.DocumentID, DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"m": 2}}}})
	require.NoError(t, err)
	lst, err := c.WaitJob(ctx, later.JobID)
	require.NoError(t, err)

	docOps, err := c.Operations(ctx, first.DocumentID, client.OperationQuery{Scope: "document"}, client.WithConsistencyToken(st.ConsistencyToken))
	require.NoError(t, err)
	var creates int
	for _, op := range docOps.Operations {
		if op.Action.Type == "CREATE_DOCUMENT" {
			creates++
			require.Equal(t, first.JobID, op.JobID)
		}
	}
	require.Equal(t, 1, creates)
	global, err := c.Operations(ctx, first.DocumentID, client.OperationQuery{}, client.WithConsistencyToken(lst.ConsistencyToken))
	require.NoError(t, err)
	require.Len(t, global.Operations, 2, "the patch of the create once, then the later job's")
	require.Equal(t, first.JobID, global.Operations[0].JobID)
	require.Equal(t, later.JobID, global.Operations[1].JobID)
}

// Every read of the read store, each with the consistency token of the
// write it must see.
func TestReadsWithTokens(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	slug := "parent-" + uuid.NewString()[:8]
	parent, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "parent", Slug: slug})
	require.NoError(t, err)
	child, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "child",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"a": 1}}}})
	require.NoError(t, err)
	_, err = c.WaitJob(ctx, child.JobID)
	require.NoError(t, err)
	_, err = c.WaitJob(ctx, parent.JobID)
	require.NoError(t, err)
	link, err := c.SubmitJob(ctx, client.Job{DocumentID: parent.DocumentID, DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "ADD_RELATIONSHIP", Scope: "document", Input: map[string]any{"targetId": child.DocumentID, "type": "child"}}}})
	require.NoError(t, err)
	linked, err := c.WaitJob(ctx, link.JobID)
	require.NoError(t, err)
	tok := client.WithConsistencyToken(linked.ConsistencyToken)

	bySlug, err := c.GetDocument(ctx, slug, tok)
	require.NoError(t, err)
	require.Equal(t, parent.DocumentID, bySlug.ID)
	require.Equal(t, "parent", bySlug.Name)

	page, err := c.FindDocuments(ctx, client.FindQuery{Parent: parent.DocumentID}, tok)
	require.NoError(t, err)
	require.Len(t, page.Documents, 1)
	require.Equal(t, child.DocumentID, page.Documents[0].ID)

	rels, err := c.Relationships(ctx, parent.DocumentID, client.RelationshipQuery{Direction: client.Outgoing}, tok)
	require.NoError(t, err)
	require.Len(t, rels.Relationships, 1)
	require.Equal(t, client.Relationship{SourceID: parent.DocumentID, Type: "child", TargetID: child.DocumentID,
		SinceIndex: rels.Relationships[0].SinceIndex}, rels.Relationships[0])

	state, err := c.State(ctx, child.DocumentID, client.StateQuery{Revision: 1})
	require.NoError(t, err)
	var got map[string]int
	require.NoError(t, state.Decode(&got))
	require.Equal(t, map[string]int{"a": 1}, got)

	doc, err := c.GetDocument(ctx, child.DocumentID, client.WithScopes("global"), client.WithWait(time.Second))
	require.NoError(t, err)
	require.Len(t, doc.Scopes, 1)
	require.NoError(t, doc.Scopes["global"].Decode(&got))
	require.Equal(t, map[string]int{"a": 1}, got)

	_, err = c.Relationships(ctx, parent.DocumentID, client.RelationshipQuery{}, client.WithScopes("global"))
	require.ErrorContains(t, err, "WithScopes applies to GetDocument only")

	_, err = c.GetDocument(ctx, parent.DocumentID, client.WithConsistencyToken("not a token"))
	require.True(t, client.IsInvalid(err), "%v", err)
	require.Equal(t, client.CodeInvalidConsistencyToken, client.AsAPIError(err).Code)
}

// The read token reads and follows jobs; a submit with it is refused 403,
// and a client with no token is refused 401 everywhere.
func TestTokensAgainstTheStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, Token: readToken})
	require.NoError(t, err)
	_, err = reader.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
	require.True(t, client.IsForbidden(err), "%v", err)
	_, err = reader.GetJob(ctx, uuid.NewString())
	require.NoError(t, err, "a read token may ask a job's status")

	anonymous, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL})
	require.NoError(t, err)
	_, err = anonymous.GetDocument(ctx, "x")
	require.True(t, client.IsUnauthorized(err), "%v", err)
	_, err = anonymous.GetJob(ctx, uuid.NewString())
	require.True(t, client.IsUnauthorized(err), "%v", err)
}
