package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// ErrorName is the stable name of every refusal (oplog.ErrorInfo.Name): a
// job failed by it ends FAILED, classified SIGNATURE_INVALID, the name the
// sync protocol gives the same failure.
const ErrorName = string(record.ErrSignatureInvalid)

// Reason is why a signature was refused.
type Reason string

const (
	// ReasonMissing: the document type requires a signature and the
	// action carries none.
	ReasonMissing Reason = "missing"
	// ReasonUnknownKey: the key id is not in the key set.
	ReasonUnknownKey Reason = "unknown key"
	// ReasonAlgorithm: the algorithm is not one the verifier knows, or
	// not the algorithm of the key named.
	ReasonAlgorithm Reason = "wrong algorithm"
	// ReasonMalformed: the value is not a signature of the algorithm
	// (not base64, or of the wrong length).
	ReasonMalformed Reason = "malformed"
	// ReasonMismatch: the signature does not verify with the key over the
	// action's canonical form: the action, its document or the key is not
	// what was signed.
	ReasonMismatch Reason = "does not verify"
	// ReasonUnsignable: the action has no canonical form (an integer
	// beyond what canonical JSON holds exactly).
	ReasonUnsignable Reason = "no canonical form"
)

// Error is a refused signature. Its Name is ErrorName whatever the Reason.
type Error struct {
	// Index is the action's position in its job's actions, ActionID its id;
	// for a load job, Loaded is set and Index is the position of the
	// operation holding the action.
	Index    int
	Loaded   bool
	ActionID string
	Reason   Reason
	// Detail says more, naming the key or algorithm.
	Detail string
}

func (e *Error) Name() string { return ErrorName }

func (e *Error) Error() string {
	return fmt.Sprintf("%s: signature %s: %s", e.Field(), e.Reason, e.Detail)
}

// Field is the path of the offending field in the job, as ingest names it
// to a client: actions[2].signature, or one of its members.
func (e *Error) Field() string {
	f := "actions[" + strconv.Itoa(e.Index) + "]"
	if e.Loaded {
		f = "operations[" + strconv.Itoa(e.Index) + "].action"
	}
	switch e.Reason {
	case ReasonMissing:
		return f + ".signature"
	case ReasonUnknownKey:
		return f + ".signature.keyId"
	case ReasonAlgorithm:
		return f + ".signature.algorithm"
	case ReasonMalformed, ReasonMismatch:
		return f + ".signature.value"
	}
	return f
}

// Verifier checks the signatures of jobs' actions against a key set, per
// document type's policy. It is safe for concurrent use; SetKeys replaces
// the keys while others verify. A nil *Verifier verifies nothing.
type Verifier struct {
	keys     atomic.Pointer[KeySet]
	policies Policies
}

// NewVerifier returns a verifier of keys under policies. A policy other than
// off with no key at all would refuse every signed action: that is refused
// here, as a setting that cannot work.
func NewVerifier(keys *KeySet, policies Policies) (*Verifier, error) {
	if err := policies.Validate(); err != nil {
		return nil, err
	}
	if policies.Verifies() && len(keys.IDs()) == 0 {
		return nil, errors.New("signature policies check signatures, but the key set is empty: give the keys")
	}
	v := &Verifier{policies: policies}
	v.SetKeys(keys)
	return v, nil
}

// SetKeys replaces the key set; verifications that started keep the set
// they started with.
func (v *Verifier) SetKeys(keys *KeySet) {
	if keys == nil {
		keys = &KeySet{}
	}
	v.keys.Store(keys)
}

// Keys returns the current key set.
func (v *Verifier) Keys() *KeySet { return v.keys.Load() }

// Policy returns the policy of a document type.
func (v *Verifier) Policy(documentType string) Policy {
	if v == nil {
		return Off
	}
	return v.policies.For(documentType)
}

// VerifyJob checks every action the job carries under its document type's
// policy and returns an *Error for the first refused one, or nil. A load
// job's actions are those of its operations. The system actions the
// executor writes itself (CREATE_DOCUMENT of a create job, DELETE_DOCUMENT
// of a delete job) are not the producer's and are not signed, nor are they
// when another replica's load carries them.
func (v *Verifier) VerifyJob(j *record.Job) error {
	pol := v.Policy(j.DocumentType)
	if pol == Off {
		return nil
	}
	keys := v.keys.Load()
	check := func(i int, a *oplog.Action, loaded bool) error {
		s := Subject{DocumentID: j.DocumentID, DocumentType: j.DocumentType, Action: a}
		if err := verify(keys, pol, s); err != nil {
			err.Index, err.Loaded = i, loaded
			return err
		}
		return nil
	}
	if j.Kind == record.KindLoad {
		for i := range j.Operations {
			a := &j.Operations[i].Action
			if a.Type == model.ActionCreateDocument || a.Type == model.ActionDeleteDocument {
				continue
			}
			if err := check(i, a, true); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range j.Actions {
		if err := check(i, &j.Actions[i], false); err != nil {
			return err
		}
	}
	return nil
}

// Verify checks one action under a policy with a key set.
func Verify(keys *KeySet, pol Policy, s Subject) error {
	if err := verify(keys, pol, s); err != nil {
		return err
	}
	return nil
}

func verify(keys *KeySet, pol Policy, s Subject) *Error {
	a := s.Action
	refuse := func(r Reason, format string, args ...any) *Error {
		return &Error{ActionID: a.ID, Reason: r, Detail: fmt.Sprintf(format, args...)}
	}
	if pol == Off {
		return nil
	}
	sig := a.Signature
	if sig == nil {
		if pol == Required {
			return refuse(ReasonMissing, "document type %s requires every action to be signed", s.DocumentType)
		}
		return nil
	}
	if sig.Algorithm != AlgorithmEd25519 {
		return refuse(ReasonAlgorithm, "%q is not supported (supported: %s)", sig.Algorithm, AlgorithmEd25519)
	}
	key, ok := keys.Lookup(sig.KeyID)
	if !ok {
		return refuse(ReasonUnknownKey, "key %q is not in the key set", sig.KeyID)
	}
	if key.Algorithm != sig.Algorithm {
		return refuse(ReasonAlgorithm, "key %q is a %s key, not %s", sig.KeyID, key.Algorithm, sig.Algorithm)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(sig.Value)
	if err != nil {
		return refuse(ReasonMalformed, "not standard base64")
	}
	if len(raw) != ed25519.SignatureSize {
		return refuse(ReasonMalformed, "an ed25519 signature is %d bytes, not %d", ed25519.SignatureSize, len(raw))
	}
	msg, err := Canonical(s)
	if err != nil {
		return refuse(ReasonUnsignable, "%v", err)
	}
	if !ed25519.Verify(key.Public, msg, raw) {
		return refuse(ReasonMismatch, "key %q did not sign this action of document %s (%s)", sig.KeyID, s.DocumentID, s.DocumentType)
	}
	return nil
}

// Sign signs an action for a document with an ed25519 private key: the
// producer's side, for tests and tools. It returns the signature to set as
// the action's Signature.
func Sign(s Subject, keyID string, priv ed25519.PrivateKey) (*oplog.Signature, error) {
	msg, err := Canonical(s)
	if err != nil {
		return nil, err
	}
	return &oplog.Signature{KeyID: keyID, Algorithm: AlgorithmEd25519, Value: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg))}, nil
}
