package signing

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Policy says what a document type asks of its actions' signatures.
type Policy string

const (
	// Required: every action a job carries must be signed, and the
	// signature must verify; an unsigned action is refused.
	Required Policy = "required"
	// Optional: an action may be unsigned, but a signature it carries must
	// verify.
	Optional Policy = "optional"
	// Off: signatures are not looked at; they are stored as they came.
	Off Policy = "off"
)

// ParsePolicy reads required, optional or off.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Required, Optional, Off:
		return p, nil
	}
	return "", fmt.Errorf("signature policy %q is not one of required, optional, off", s)
}

// Policies are the policy of each listed document type and the default of
// the others. The zero value verifies nothing.
type Policies struct {
	// Default is the policy of a type not in ByType. Default Off.
	Default Policy
	// ByType is the policy per document type.
	ByType map[string]Policy
}

// For returns the policy of a document type.
func (p Policies) For(documentType string) Policy {
	if pol, ok := p.ByType[documentType]; ok {
		return pol
	}
	if p.Default == "" {
		return Off
	}
	return p.Default
}

// Verifies reports whether any document type is checked at all.
func (p Policies) Verifies() bool {
	if p.Default != "" && p.Default != Off {
		return true
	}
	for _, pol := range p.ByType {
		if pol != Off {
			return true
		}
	}
	return false
}

// Validate refuses a policy that is not one of the three.
func (p Policies) Validate() error {
	if p.Default != "" {
		if _, err := ParsePolicy(string(p.Default)); err != nil {
			return fmt.Errorf("default %w", err)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(p.ByType)) {
		if t == "" {
			return fmt.Errorf("a signature policy names no document type")
		}
		if _, err := ParsePolicy(string(p.ByType[t])); err != nil {
			return fmt.Errorf("document type %s: %w", t, err)
		}
	}
	return nil
}

// ParsePolicies reads a list of type=policy entries, as the flag
// --signature-policy takes them ("doclog/ledger=required"). A document type
// may itself hold "=", so an entry splits at its last one.
func ParsePolicies(entries []string, def string) (Policies, error) {
	p := Policies{Default: Off, ByType: map[string]Policy{}}
	if def != "" {
		pol, err := ParsePolicy(def)
		if err != nil {
			return Policies{}, fmt.Errorf("default %w", err)
		}
		p.Default = pol
	}
	for _, e := range entries {
		i := strings.LastIndexByte(e, '=')
		if i <= 0 {
			return Policies{}, fmt.Errorf("signature policy %q is not type=policy", e)
		}
		typ := e[:i]
		pol, err := ParsePolicy(e[i+1:])
		if err != nil {
			return Policies{}, fmt.Errorf("document type %s: %w", typ, err)
		}
		if _, dup := p.ByType[typ]; dup {
			return Policies{}, fmt.Errorf("document type %s has two signature policies", typ)
		}
		p.ByType[typ] = pol
	}
	return p, nil
}
