package client

import (
	"context"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The evidence log (SPEC "Evidence: a ledger that proves itself"): every
// entry is a leaf of one Merkle tree whose head the server signs as a
// checkpoint. `arbiter audit verify` checks what these methods return.

// AuditProof is an entry's inclusion proof in a signed checkpoint's tree.
type AuditProof struct {
	LogIndex   int64    `json:"log_index"`
	TreeSize   int64    `json:"tree_size"`
	LeafHash   string   `json:"leaf_hash"`
	Inclusion  []string `json:"inclusion"`
	Checkpoint string   `json:"checkpoint"`
}

// AuditKey is the verifier key of the log's checkpoints
// (origin+hash+base64). It needs no API key.
func (c *Client) AuditKey(ctx context.Context) (string, error) {
	b, err := c.raw(ctx, "AuditKey")
	return strings.TrimSpace(string(b)), err
}

// AuditCheckpoint is the newest signed checkpoint, a C2SP signed note. It
// needs no API key; before the first checkpoint it is a not_found error.
func (c *Client) AuditCheckpoint(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, "AuditCheckpoint")
}

// AuditProof proves an entry's inclusion in the newest checkpoint, or in
// the one of tree size size when size > 0.
func (c *Client) AuditProof(ctx context.Context, entryID string, size int64) (*AuditProof, error) {
	var q url.Values
	if size > 0 {
		q = url.Values{"size": {strconv.FormatInt(size, 10)}}
	}
	var p AuditProof
	if err := c.call(ctx, "AuditProof", entryID, q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// AuditConsistency proves that the tree of size from is a prefix of the
// tree of size to (RFC 6962): base64 hashes.
func (c *Client) AuditConsistency(ctx context.Context, from, to int64) ([]string, error) {
	var out struct {
		Proof []string `json:"proof"`
	}
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	if err := c.call(ctx, "AuditConsistency", "", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Proof, nil
}

// AuditExport writes the bundle of a namespace's entries recorded in
// [since, until) (zero times: unbounded) to w, as it arrives.
func (c *Client) AuditExport(ctx context.Context, namespace string, since, until time.Time, w io.Writer) error {
	q := url.Values{"namespace": {namespace}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	if !until.IsZero() {
		q.Set("until", until.UTC().Format(time.RFC3339Nano))
	}
	status, body, err := c.sendTo(ctx, "AuditExport", "", q, nil, nil, 0, w)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return answerError(status, body)
	}
	return nil
}
