package signing_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/signing"
)

func pubOf(seed byte) ed25519.PublicKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
}

func pemOf(t *testing.T, pub ed25519.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestLoadKeysFromAJSONFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"keys":[
		{"id":"till-7","algorithm":"ed25519","publicKey":"`+base64.StdEncoding.EncodeToString(pubOf(1))+`"},
		{"id":"till-8","algorithm":"ed25519","publicKey":"`+base64.StdEncoding.EncodeToString(pubOf(2))+`"}]}`), 0o440))
	ks, err := signing.LoadKeys(path)
	require.NoError(t, err)
	require.Equal(t, []string{"till-7", "till-8"}, ks.IDs())
	k, ok := ks.Lookup("till-8")
	require.True(t, ok)
	require.Equal(t, pubOf(2), k.Public)

	for _, tc := range []struct{ file, want string }{
		{`{"keys":[{"id":"a","algorithm":"ed25519","publicKey":"AAAA"}]}`, `key "a": an ed25519 public key is 32 bytes, not 3`},
		{`{"keys":[{"id":"a","algorithm":"rsa","publicKey":"` + base64.StdEncoding.EncodeToString(pubOf(1)) + `"}]}`, `key "a": algorithm "rsa" is not supported`},
		{`{"keys":[{"id":"a","algorithm":"ed25519","publicKey":"` + base64.StdEncoding.EncodeToString(pubOf(1)) + `"},{"id":"a","algorithm":"ed25519","publicKey":"` + base64.StdEncoding.EncodeToString(pubOf(2)) + `"}]}`, `key id "a" is given twice`},
		{`{"keys":[{"id":"","algorithm":"ed25519","publicKey":""}]}`, "a key has no id"},
		{`{"keys":[{"id":"a","algorithm":"ed25519","publicKey":"!!"}]}`, "keys[0].publicKey: not standard base64"},
		{`{"keys":[{"id":"a","alg":"ed25519"}]}`, `unknown field "alg"`},
		{`{}`, `the key file has no "keys" list`},
		{`not json`, "decoding the key file"},
	} {
		require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o440))
		_, err := signing.LoadKeys(path)
		require.ErrorContains(t, err, tc.want, tc.file)
		require.ErrorContains(t, err, path, tc.file)
	}
	_, err = signing.LoadKeys(filepath.Join(t.TempDir(), "absent"))
	require.ErrorContains(t, err, "reading signature keys")
}

// TestLoadKeysFromASecretVolume lays a directory out as the kubelet mounts a
// Secret (each key a symbolic link into ..data, itself a link to a
// timestamped directory) and reads one key per file, PEM or base64.
func TestLoadKeysFromASecretVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_12_01_18_00_00.123456789")
	require.NoError(t, os.Mkdir(ts, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "till-7"), pemOf(t, pubOf(1)), 0o440))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "till-8"), []byte(base64.StdEncoding.EncodeToString(pubOf(2))+"\n"), 0o440))
	require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")))
	for _, name := range []string{"till-7", "till-8"} {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "nested"), 0o755))

	ks, err := signing.LoadKeys(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"till-7", "till-8"}, ks.IDs())
	for id, want := range map[string]ed25519.PublicKey{"till-7": pubOf(1), "till-8": pubOf(2)} {
		k, ok := ks.Lookup(id)
		require.True(t, ok)
		require.Equal(t, want, k.Public)
		require.Equal(t, signing.AlgorithmEd25519, k.Algorithm)
	}

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o440))
	_, err = signing.LoadKeys(dir)
	require.ErrorContains(t, err, "a PEM PRIVATE KEY block, not a PUBLIC KEY")
	require.ErrorContains(t, err, filepath.Join(dir, "bad"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad"), []byte("hello"), 0o440))
	_, err = signing.LoadKeys(dir)
	require.ErrorContains(t, err, "neither a PEM PUBLIC KEY block nor a key in standard base64")
}
