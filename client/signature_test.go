package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/signing"
)

// A signed action submitted through the client comes back from the read
// store with its signature, which verifies over what the read returns.
// (The package's stack checks no signatures; the executor's tests cover
// the checks.)
func TestSignatureReadsBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize))
	doc := "signed-" + uuid.NewString()
	created, err := c.CreateDocument(ctx, client.CreateDocument{DocumentID: doc, DocumentType: "doclog/json"})
	require.NoError(t, err)
	_, err = c.WaitJob(ctx, created.JobID)
	require.NoError(t, err)

	a := oplog.Action{ID: uuid.NewString(), Type: "MERGE_PATCH", Scope: "global", TimestampUtcMs: time.Now().UnixMilli(), Input: json.RawMessage(`{"n":1}`)}
	sig, err := signing.Sign(signing.Subject{DocumentID: doc, DocumentType: "doclog/json", Action: &a}, "k1", priv)
	require.NoError(t, err)
	sub, err := c.SubmitJob(ctx, client.Job{DocumentID: doc, DocumentType: "doclog/json", Actions: []client.Action{{
		ID: a.ID, Type: a.Type, Scope: a.Scope, TimestampUtcMs: a.TimestampUtcMs, Input: map[string]any{"n": 1},
		Signature: &client.Signature{KeyID: sig.KeyID, Algorithm: sig.Algorithm, Value: sig.Value},
	}}})
	require.NoError(t, err)
	st, err := c.WaitJob(ctx, sub.JobID)
	require.NoError(t, err)

	page, err := c.Operations(ctx, doc, client.OperationQuery{}, client.WithConsistencyToken(st.ConsistencyToken))
	require.NoError(t, err)
	require.Len(t, page.Operations, 1)
	op := page.Operations[0]
	require.Equal(t, &client.Signature{KeyID: "k1", Algorithm: "ed25519", Value: sig.Value}, op.Action.Signature)

	keys, err := signing.NewKeySet(signing.Key{ID: "k1", Algorithm: signing.AlgorithmEd25519, Public: priv.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	read := oplog.Action{ID: op.Action.ID, Type: op.Action.Type, Scope: op.Action.Scope, TimestampUtcMs: op.Action.TimestampUtcMs, Input: op.Action.Input,
		Signature: &oplog.Signature{KeyID: op.Action.Signature.KeyID, Algorithm: op.Action.Signature.Algorithm, Value: op.Action.Signature.Value}}
	require.NoError(t, signing.Verify(keys, signing.Required, signing.Subject{DocumentID: op.DocumentID, DocumentType: op.DocumentType, Action: &read}))
}
