// Package evidence is what lets the ledger prove itself (SPEC "Evidence: a
// ledger that proves itself"): every entry is a leaf of one append-only
// Merkle tree hashed as RFC 6962 does it, and the tree's head is published
// as a C2SP checkpoint signed as a C2SP note with an Ed25519 key. The
// hashing, the proofs and the notes are the Go checksum database's own
// code (golang.org/x/mod/sumdb/tlog and …/note); this package only says
// what a leaf is, keeps the key and writes and reads the checkpoint text.
package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/jsontext"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// DefaultOrigin names the log when ARBITER_LOG_ORIGIN is unset.
const DefaultOrigin = "arbiter.local/log"

// leafEntry is an entry as its leaf holds it: the entry as the API answers
// it, with the action's namespace, id and key.
type leafEntry struct {
	ID         string           `json:"id"`
	Namespace  string           `json:"namespace"`
	ActionID   string           `json:"action_id"`
	Key        string           `json:"key"`
	Seq        int              `json:"seq"`
	Type       record.EntryType `json:"type"`
	Actor      record.Actor     `json:"actor"`
	Attempt    *int             `json:"attempt"`
	Payload    json.RawMessage  `json:"payload"`
	OccurredAt any              `json:"occurred_at"`
	RecordedAt any              `json:"recorded_at"`
}

// Leaf is the bytes of e's leaf: the JSON object of SPEC written
// canonically (jsontext.Canonical: keys sorted as RFC 8785 sorts them, no
// insignificant whitespace), so that the same rows give the same bytes on
// either database and at any later time. A verifier hashes these bytes as
// they are given and never writes them again.
func Leaf(namespace, actionID, key string, e record.Entry) ([]byte, error) {
	l := leafEntry{ID: e.ID, Namespace: namespace, ActionID: actionID, Key: key, Seq: e.Seq, Type: e.Type,
		Actor: e.Actor, Attempt: e.Attempt, Payload: e.Payload, RecordedAt: e.RecordedAt.UTC()}
	if e.OccurredAt != nil {
		l.OccurredAt = e.OccurredAt.UTC()
	}
	if len(l.Payload) == 0 {
		l.Payload = json.RawMessage("{}")
	}
	raw, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("evidence: leaf of entry %s: %w", e.ID, err)
	}
	out, err := jsontext.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("evidence: leaf of entry %s: %w", e.ID, err)
	}
	return out, nil
}

// LeafHash is the RFC 6962 hash of a leaf: SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) tlog.Hash { return tlog.RecordHash(leaf) }

// Key is the log's signing key and the verifier key that checks it.
type Key struct {
	Signer   note.Signer
	Verifier string // origin+hash+base64, as `arbiter audit key` prints it
}

// LoadOrCreateKey reads the signing key at path, or makes one for origin
// and writes it there (0600, its directory 0700) when there is none. A key
// made for another origin is refused: its checkpoints would name a log
// the verifiers do not know.
func LoadOrCreateKey(path, origin string) (*Key, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return createKey(path, origin)
	case err != nil:
		return nil, fmt.Errorf("evidence: read the log's signing key: %w", err)
	}
	return parseKey(path, strings.TrimSpace(string(b)), origin)
}

func createKey(path, origin string) (*Key, error) {
	skey, _, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return nil, fmt.Errorf("evidence: make a signing key for %q: %w", origin, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("evidence: keep the log's signing key: %w", err)
	}
	// O_EXCL: of two processes making the key at once, one writes it and
	// the other reads what that one wrote.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateKey(path, origin)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: keep the log's signing key: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("evidence: write the log's signing key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("evidence: write the log's signing key: %w", err)
	}
	return parseKey(path, skey, origin)
}

func parseKey(path, skey, origin string) (*Key, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s does not hold a signing key (PRIVATE+KEY+…): %w", path, err)
	}
	if s.Name() != origin {
		return nil, fmt.Errorf("evidence: the signing key in %s is for the log %q, not %q (ARBITER_LOG_ORIGIN)", path, s.Name(), origin)
	}
	vkey, err := verifierOf(skey)
	if err != nil {
		return nil, err
	}
	return &Key{Signer: s, Verifier: vkey}, nil
}

// verifierOf derives the verifier key of a note signing key
// (PRIVATE+KEY+name+hash+base64 of the algorithm byte and the seed).
func verifierOf(skey string) (string, error) {
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return "", errors.New("evidence: malformed signing key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 33 || raw[0] != 1 {
		return "", errors.New("evidence: the signing key is not an Ed25519 key")
	}
	return note.NewEd25519VerifierKey(parts[2], ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey))
}

// Checkpoint is a tree head: the log's origin, its size and root hash.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// text is the checkpoint's body in the C2SP tlog-checkpoint format.
func (c Checkpoint) text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, c.Root)
}

// Sign writes c as a C2SP signed note.
func Sign(k *Key, c Checkpoint) ([]byte, error) {
	if c.Origin != k.Signer.Name() {
		return nil, fmt.Errorf("evidence: a checkpoint of %q signed with the key of %q", c.Origin, k.Signer.Name())
	}
	msg, err := note.Sign(&note.Note{Text: c.text()}, k.Signer)
	if err != nil {
		return nil, fmt.Errorf("evidence: sign the checkpoint: %w", err)
	}
	return msg, nil
}

// Open checks a signed checkpoint against the verifier key and reads it.
func Open(msg []byte, verifierKey string) (Checkpoint, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: verifier key: %w", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: checkpoint: %w", err)
	}
	lines := strings.SplitAfter(n.Text, "\n")
	if len(lines) < 4 || lines[0] != v.Name()+"\n" {
		return Checkpoint{}, fmt.Errorf("evidence: checkpoint is not of the log %q", v.Name())
	}
	size, err := strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10)+"\n" {
		return Checkpoint{}, errors.New("evidence: checkpoint: malformed tree size")
	}
	root, err := tlog.ParseHash(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || !bytes.HasSuffix([]byte(lines[2]), []byte("\n")) {
		return Checkpoint{}, errors.New("evidence: checkpoint: malformed root hash")
	}
	return Checkpoint{Origin: v.Name(), Size: size, Root: root}, nil
}
