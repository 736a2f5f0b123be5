package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// AlgorithmEd25519 is the one algorithm signatures use so far (RFC 8032,
// pure Ed25519, no prehash), as a signature's algorithm and a key's.
const AlgorithmEd25519 = "ed25519"

// Key is a public key signatures are checked with.
type Key struct {
	ID        string
	Algorithm string
	Public    ed25519.PublicKey
}

// KeySet is the keys by id. The zero value holds none.
type KeySet struct {
	keys map[string]Key
}

// NewKeySet builds a key set, refusing an empty or repeated id, an
// algorithm other than ed25519 and a public key of the wrong length.
func NewKeySet(keys ...Key) (*KeySet, error) {
	ks := &KeySet{keys: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if k.ID == "" {
			return nil, errors.New("a key has no id")
		}
		if err := oplog.CheckText(k.ID); err != nil {
			return nil, fmt.Errorf("key id %q: %w", k.ID, err)
		}
		if _, dup := ks.keys[k.ID]; dup {
			return nil, fmt.Errorf("key id %q is given twice", k.ID)
		}
		if k.Algorithm != AlgorithmEd25519 {
			return nil, fmt.Errorf("key %q: algorithm %q is not supported (supported: %s)", k.ID, k.Algorithm, AlgorithmEd25519)
		}
		if len(k.Public) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key %q: an ed25519 public key is %d bytes, not %d", k.ID, ed25519.PublicKeySize, len(k.Public))
		}
		ks.keys[k.ID] = k
	}
	return ks, nil
}

// Lookup returns the key of id.
func (ks *KeySet) Lookup(id string) (Key, bool) {
	if ks == nil {
		return Key{}, false
	}
	k, ok := ks.keys[id]
	return k, ok
}

// IDs lists the key ids in order.
func (ks *KeySet) IDs() []string {
	if ks == nil {
		return nil
	}
	ids := make([]string, 0, len(ks.keys))
	for id := range ks.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// keyFile is the JSON form of a key set.
type keyFile struct {
	Keys []struct {
		ID        string `json:"id"`
		Algorithm string `json:"algorithm"`
		PublicKey string `json:"publicKey"`
	} `json:"keys"`
}

// LoadKeys reads a key set from path, in one of two forms:
//
//   - a file: JSON {"keys":[{"id":"till-7","algorithm":"ed25519","publicKey":"<base64>"}]},
//     publicKey the 32 bytes of the key in standard base64;
//   - a directory: one key per file, its id the file's name and its content
//     the key as PEM (a PUBLIC KEY block, as openssl pkey -pubout writes it)
//     or the 32 bytes in standard base64. Names starting with a dot and
//     subdirectories are skipped, so a Kubernetes Secret mounted as a
//     volume (its keys are files, beside ..data and its timestamped
//     directory) is such a directory as it is.
func LoadKeys(path string) (*KeySet, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading signature keys: %w", err)
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading signature keys: %w", err)
		}
		ks, err := ParseKeyFile(data)
		if err != nil {
			return nil, fmt.Errorf("reading signature keys from %s: %w", path, err)
		}
		return ks, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading signature keys: %w", err)
	}
	var keys []Key
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		file := filepath.Join(path, name)
		st, err := os.Stat(file) // follows a Secret volume's symbolic links
		if err != nil {
			return nil, fmt.Errorf("reading signature key %s: %w", file, err)
		}
		if st.IsDir() {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading signature key: %w", err)
		}
		pub, err := ParsePublicKey(data)
		if err != nil {
			return nil, fmt.Errorf("reading signature key %s: %w", file, err)
		}
		keys = append(keys, Key{ID: name, Algorithm: AlgorithmEd25519, Public: pub})
	}
	ks, err := NewKeySet(keys...)
	if err != nil {
		return nil, fmt.Errorf("reading signature keys from %s: %w", path, err)
	}
	return ks, nil
}

// ParseKeyFile reads a key set in its JSON form (see LoadKeys), strictly:
// an unknown field is refused, so a misspelt one is not silently ignored.
func ParseKeyFile(data []byte) (*KeySet, error) {
	var f keyFile
	if err := jsonvalue.DecodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("decoding the key file: %w", err)
	}
	if f.Keys == nil {
		return nil, errors.New(`the key file has no "keys" list`)
	}
	keys := make([]Key, 0, len(f.Keys))
	for i, k := range f.Keys {
		pub, err := base64.StdEncoding.Strict().DecodeString(k.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("keys[%d].publicKey: not standard base64: %w", i, err)
		}
		keys = append(keys, Key{ID: k.ID, Algorithm: k.Algorithm, Public: pub})
	}
	return NewKeySet(keys...)
}

// ParsePublicKey reads one ed25519 public key: a PEM PUBLIC KEY block
// (PKIX), or the key's 32 bytes in standard base64. Surrounding whitespace
// is ignored.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	data = bytes.TrimSpace(data)
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM %s block, not a PUBLIC KEY", block.Type)
		}
		pk, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the PEM public key: %w", err)
		}
		pub, ok := pk.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("the PEM public key is a %T, not an ed25519 key", pk)
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(string(data))
	if err != nil {
		return nil, errors.New("neither a PEM PUBLIC KEY block nor a key in standard base64")
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("an ed25519 public key is %d bytes, not %d", ed25519.PublicKeySize, len(raw))
	}
	return ed25519.PublicKey(raw), nil
}

// Equal reports whether two key sets hold the same keys under the same ids.
func (ks *KeySet) Equal(other *KeySet) bool {
	a, b := ks.IDs(), other.IDs()
	if !slices.Equal(a, b) {
		return false
	}
	for _, id := range a {
		x, _ := ks.Lookup(id)
		y, _ := other.Lookup(id)
		if x.Algorithm != y.Algorithm || !bytes.Equal(x.Public, y.Public) {
			return false
		}
	}
	return true
}
