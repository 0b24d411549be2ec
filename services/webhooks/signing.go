package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Webhook signatures follow the Standard Webhooks specification: the secret
// is "whsec_" + base64 of random bytes, and webhook-signature is "v1," +
// base64(HMAC-SHA256(secret bytes, id + "." + timestamp + "." + body)), one
// per active secret, separated by spaces.

const secretPrefix = "whsec_"

// newWebhookSecret returns a fresh secret of 32 random bytes.
func newWebhookSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("webhooks: no randomness: %v", err))
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// signature returns "v1,<base64>" for one secret.
func signature(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", fmt.Errorf("webhooks: bad secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// signatures signs with every secret given, for the webhook-signature header.
func signatures(secrets []string, msgID string, ts time.Time, body []byte) (string, error) {
	out := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := signature(s, msgID, ts, body)
		if err != nil {
			return "", err
		}
		out = append(out, sig)
	}
	return strings.Join(out, " "), nil
}
