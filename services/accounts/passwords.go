package accounts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/arbiter-ledger/arbiter/services"
	"golang.org/x/crypto/argon2"
)

// Password hashing with argon2id at OWASP's recommended minimum
// (19 MiB, 2 passes, 1 lane), stored in the PHC string format.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
)

// Password length limits (OWASP ASVS 2.1.1 and 2.1.2).
const (
	MinPasswordChars = 12
	MaxPasswordChars = 256
)

// ValidatePassword checks a new password's length.
func ValidatePassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordChars || n > MaxPasswordChars || !utf8.ValidString(pw) {
		return services.Errorf(services.CodeInvalid, "a password must be %d to %d characters", MinPasswordChars, MaxPasswordChars)
	}
	return nil
}

func hashPassword(pw string) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("accounts: no randomness: %v", err))
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// checkPassword compares pw with a PHC argon2id hash in constant time.
func checkPassword(encoded, pw string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when an account does not exist, so a sign-in
// takes as long for an unknown email as for a wrong password.
var dummyHash = sync.OnceValue(func() string { return hashPassword("arbiter-timing-equaliser") })
