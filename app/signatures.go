package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/ingest"

	"github.com/doclog/doclog/signing"
)

// SignatureSettings are the flags of signed actions (package signing): the
// key set and the policy per document type. The executor checks every
// job's signatures with them before storing anything, and ingest refuses a
// bad one early.
type SignatureSettings struct {
	// Keys is the key set's path: a JSON file or a directory of one key per
	// file (signing.LoadKeys). Empty: no keys.
	Keys string
	// Policy lists type=policy entries; DefaultPolicy is the policy of the
	// types they do not list. Default off.
	Policy        []string
	DefaultPolicy string
}

func bindSignatureFlags(fs *pflag.FlagSet, s *SignatureSettings) {
	fs.StringVar(&s.Keys, "signature-keys", "", "public keys that action signatures are checked with: a JSON file {\"keys\":[{\"id\",\"algorithm\":\"ed25519\",\"publicKey\"}]} or a directory of one key per file (PEM or base64, named by its key id), such as a mounted Secret; read again every 10s")
	fs.StringSliceVar(&s.Policy, "signature-policy", nil, "signature policy per document type, as type=required (every action signed), type=optional (a signature present must verify) or type=off")
	fs.StringVar(&s.DefaultPolicy, "signature-default-policy", string(signing.Off), "signature policy of the document types --signature-policy does not list: required, optional or off")
}

func (s *SignatureSettings) policies() (signing.Policies, error) {
	// Empty, as in Settings built without flags, is off.
	if _, err := signing.ParsePolicy(s.DefaultPolicy); s.DefaultPolicy != "" && err != nil {
		return signing.Policies{}, fmt.Errorf("--signature-default-policy: %w", err)
	}
	p, err := signing.ParsePolicies(s.Policy, s.DefaultPolicy)
	if err != nil {
		return signing.Policies{}, fmt.Errorf("--signature-policy: %w", err)
	}
	return p, nil
}

// validate checks what it can without reading the keys: the policies, and
// that a policy that checks signatures has keys to check them with.
func (s *SignatureSettings) validate() []error {
	p, err := s.policies()
	if err != nil {
		return []error{err}
	}
	if p.Verifies() && s.Keys == "" {
		return []error{errors.New("--signature-policy and --signature-default-policy check signatures, which needs --signature-keys")}
	}
	return nil
}

// verifier reads the keys and builds the verifier; nil when no policy
// checks signatures.
func (s *SignatureSettings) verifier() (*signing.Verifier, error) {
	p, err := s.policies()
	if err != nil || !p.Verifies() {
		return nil, err
	}
	keys, err := signing.LoadKeys(s.Keys)
	if err != nil {
		return nil, err
	}
	return signing.NewVerifier(keys, p)
}

// signatures is the verifier as the roles take it: no verifier at all,
// rather than a nil one, when no policy checks signatures.
func (a *App) signatures() interface {
	ingest.SignatureVerifier
	executor.SignatureVerifier
} {
	if a.verifier == nil {
		return nil
	}
	return a.verifier
}

// signatureKeysWatch re-reads --signature-keys while the process runs, so a
// key added to the mounted Secret is used without a restart.
func (a *App) signatureKeysWatch() component {
	log := a.logger.Named("signing")
	return component{
		name: "signature-keys",
		run: func(ctx context.Context) error {
			a.verifier.WatchKeys(ctx, a.s.Signatures.Keys, signing.DefaultWatchInterval,
				func(ids []string) { log.Info("signature keys reloaded", zap.Strings("key_ids", ids)) },
				func(err error) { log.Warn("signature keys not reloaded; the keys in use stay", zap.Error(err)) })
			return nil
		},
		stop: func(context.Context) error { return nil },
	}
}
