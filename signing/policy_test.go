package signing_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
	"github.com/doclog/doclog/signing"
)

// policyBundle is a verifier with one key and a job builder.
type policyBundle struct {
	priv ed25519.PrivateKey
	keys *signing.KeySet
}

func setupPolicies(t *testing.T) *policyBundle {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	keys, err := signing.NewKeySet(signing.Key{ID: "k1", Algorithm: signing.AlgorithmEd25519, Public: priv.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	return &policyBundle{priv: priv, keys: keys}
}

// job has three actions of documentType: signed, unsigned, and signed with a
// bad signature, as picked by which.
func (b *policyBundle) job(t *testing.T, documentType string, which ...string) *record.Job {
	t.Helper()
	j := &record.Job{JobID: "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f", Kind: record.KindMutate, DocumentID: "d1", DocumentType: documentType}
	for i, w := range which {
		a := oplog.Action{ID: "a" + string(rune('0'+i)), Type: "SET", Scope: "global", TimestampUtcMs: 1764460800000, Input: json.RawMessage(`{"n":1}`)}
		s := signing.Subject{DocumentID: j.DocumentID, DocumentType: documentType, Action: &a}
		switch w {
		case "signed", "bad":
			sig, err := signing.Sign(s, "k1", b.priv)
			require.NoError(t, err)
			a.Signature = sig
			if w == "bad" {
				a.Input = json.RawMessage(`{"n":2}`)
			}
		}
		j.Actions = append(j.Actions, a)
	}
	return j
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	b := setupPolicies(t)
	pols := signing.Policies{Default: signing.Optional, ByType: map[string]signing.Policy{
		"acme/strict": signing.Required, "acme/loose": signing.Off,
	}}
	v, err := signing.NewVerifier(b.keys, pols)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, typ string
		actions   []string
		// refused is the index of the refused action and its reason; -1
		// when the job passes.
		refused int
		reason  signing.Reason
	}{
		{"required: all signed", "acme/strict", []string{"signed", "signed"}, -1, ""},
		{"required: an unsigned action", "acme/strict", []string{"signed", "unsigned"}, 1, signing.ReasonMissing},
		{"required: a bad signature", "acme/strict", []string{"bad", "signed"}, 0, signing.ReasonMismatch},
		{"required: no actions (a create job's system action is not the producer's)", "acme/strict", nil, -1, ""},
		{"optional (the default): unsigned", "acme/other", []string{"unsigned", "unsigned"}, -1, ""},
		{"optional (the default): signed", "acme/other", []string{"unsigned", "signed"}, -1, ""},
		{"optional (the default): a bad signature", "acme/other", []string{"unsigned", "bad"}, 1, signing.ReasonMismatch},
		{"off: a bad signature is not looked at", "acme/loose", []string{"bad", "unsigned"}, -1, ""},
	} {
		err := v.VerifyJob(b.job(t, tc.typ, tc.actions...))
		if tc.refused < 0 {
			require.NoError(t, err, tc.name)
			continue
		}
		var se *signing.Error
		require.ErrorAs(t, err, &se, tc.name)
		require.Equal(t, tc.refused, se.Index, tc.name)
		require.Equal(t, tc.reason, se.Reason, tc.name)
		require.Contains(t, err.Error(), se.Field(), tc.name)
	}
	require.Equal(t, signing.Required, v.Policy("acme/strict"))
	require.Equal(t, signing.Optional, v.Policy("acme/unlisted"))

	// A load job's actions are its operations'; another replica's
	// CREATE_DOCUMENT is the executor's, unsigned.
	signed := b.job(t, "acme/strict", "signed", "unsigned")
	load := &record.Job{JobID: signed.JobID, Kind: record.KindLoad, DocumentID: signed.DocumentID, DocumentType: "acme/strict",
		Operations: []record.LoadOperation{
			{OpID: "o0", Action: oplog.Action{ID: "c", Type: "CREATE_DOCUMENT", Scope: "document", Input: json.RawMessage(`{"documentType":"acme/strict"}`)}},
			{OpID: "o1", Index: 0, Action: signed.Actions[0]},
			{OpID: "o2", Index: 1, Action: signed.Actions[1]},
		}}
	err = v.VerifyJob(load)
	var se *signing.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, signing.ReasonMissing, se.Reason)
	require.Equal(t, "operations[2].action.signature", se.Field())
	load.Operations = load.Operations[:2]
	require.NoError(t, v.VerifyJob(load))

	var none *signing.Verifier
	require.NoError(t, none.VerifyJob(b.job(t, "acme/strict", "bad")), "a nil verifier verifies nothing")
	require.Equal(t, signing.Off, signing.Policies{}.For("acme/strict"), "the zero policies are off")
}

func TestErrorFields(t *testing.T) {
	t.Parallel()
	for reason, field := range map[signing.Reason]string{
		signing.ReasonMissing: "actions[3].signature", signing.ReasonUnknownKey: "actions[3].signature.keyId",
		signing.ReasonAlgorithm: "actions[3].signature.algorithm", signing.ReasonMalformed: "actions[3].signature.value",
		signing.ReasonMismatch: "actions[3].signature.value", signing.ReasonUnsignable: "actions[3]",
	} {
		require.Equal(t, field, (&signing.Error{Index: 3, Reason: reason}).Field())
	}
}

func TestParsePolicies(t *testing.T) {
	t.Parallel()
	p, err := signing.ParsePolicies([]string{"doclog/ledger=required", "a=b=optional", "doclog/json=off"}, "optional")
	require.NoError(t, err)
	require.Equal(t, signing.Policies{Default: signing.Optional, ByType: map[string]signing.Policy{
		"doclog/ledger": signing.Required, "a=b": signing.Optional, "doclog/json": signing.Off,
	}}, p)
	require.True(t, p.Verifies())

	p, err = signing.ParsePolicies(nil, "")
	require.NoError(t, err)
	require.False(t, p.Verifies())
	require.Equal(t, signing.Off, p.For("doclog/ledger"))

	for _, tc := range []struct {
		entries []string
		def     string
		want    string
	}{
		{[]string{"doclog/ledger"}, "", `signature policy "doclog/ledger" is not type=policy`},
		{[]string{"=required"}, "", `signature policy "=required" is not type=policy`},
		{[]string{"doclog/ledger=mandatory"}, "", `document type doclog/ledger: signature policy "mandatory" is not one of required, optional, off`},
		{[]string{"t=off", "t=required"}, "", "document type t has two signature policies"},
		{nil, "always", `default signature policy "always" is not one of required, optional, off`},
	} {
		_, err := signing.ParsePolicies(tc.entries, tc.def)
		require.EqualError(t, err, tc.want)
	}
}

func TestNewVerifierRefusesPoliciesWithoutKeys(t *testing.T) {
	t.Parallel()
	_, err := signing.NewVerifier(nil, signing.Policies{ByType: map[string]signing.Policy{"t": signing.Optional}})
	require.ErrorContains(t, err, "the key set is empty")
	_, err = signing.NewVerifier(nil, signing.Policies{Default: "sometimes"})
	require.ErrorContains(t, err, `"sometimes" is not one of`)
	v, err := signing.NewVerifier(nil, signing.Policies{Default: signing.Off})
	require.NoError(t, err)
	require.Empty(t, v.Keys().IDs())
}
