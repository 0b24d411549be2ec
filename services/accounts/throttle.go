package accounts

import (
	"context"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
)

// Sign-in throttling. An attempt is counted before its password is checked,
// in a transaction holding the subject's row, so parallel attempts cannot
// all pass a check that none of them has recorded yet; a successful sign-in
// takes its count back.
//
// An address that fails too often is refused outright for a while that
// doubles with each further failure: that address is the abuser. An account
// is never locked, since anyone who knows its email could lock its owner
// out: past a few failures its attempts are spaced out instead, each waiting
// its turn for longer, so guessing one password from many addresses stays
// slow while the owner's right password still gets in.
const (
	addressFailureLimit = 20
	failureWindow       = 15 * time.Minute
	maxLock             = 15 * time.Minute

	accountFreeFailures = 5
	accountDelayBase    = 250 * time.Millisecond
	accountDelayMax     = 8 * time.Second
	// accountMaxWait is the longest an attempt is held for its turn; one
	// whose turn is further away is told when to come back.
	accountMaxWait = 10 * time.Second
)

// Password hashing is memory-hard (argon2id, 19 MiB each), so only a few
// run at once; an attempt waits a moment for a slot (Accounts.HashWait, this
// long unless set otherwise) and is then told the server is busy.
const (
	hashSlots = 4
	hashWait  = 5 * time.Second
)

// ThrottledError is a sign-in the throttle refused; RetryAfter says when the
// next attempt can be made.
type ThrottledError struct {
	RetryAfter time.Duration
	err        *services.Error
}

func (e *ThrottledError) Error() string { return e.err.Error() }
func (e *ThrottledError) Unwrap() error { return e.err }

func throttled(wait time.Duration, format string, args ...any) error {
	return &ThrottledError{RetryAfter: wait, err: services.Errorf(services.CodeTooManyAttempts, format, args...)}
}

func addressSubject(address string) string { return "address:" + address }
func accountSubject(email string) string   { return "account:" + email }

// claimAddress counts an attempt from address, or refuses it while the
// address is locked.
func (a *Accounts) claimAddress(ctx context.Context, address string, now time.Time) error {
	var refused error
	err := a.lockSubject(ctx, addressSubject(address), now, func(f *models.SignInFailure) {
		if f.LockedUntil != nil && f.LockedUntil.After(now) {
			refused = throttled(f.LockedUntil.Sub(now), "too many failed sign-ins from your address; try again after %s", f.LockedUntil.Format(time.RFC3339))
			return
		}
		f.Failures++
		if over := f.Failures - addressFailureLimit; over > 0 {
			lock := min(30*time.Second<<min(over-1, 10), maxLock)
			until := now.Add(lock)
			f.LockedUntil = &until
			refused = throttled(lock, "too many failed sign-ins from your address; try again after %s", until.Format(time.RFC3339))
		}
	})
	if err != nil {
		return err
	}
	return refused
}

// claimAccount counts an attempt on an account and returns how long it must
// wait for its turn; past accountFreeFailures each turn comes later than the
// one before. An attempt whose turn is too far away is refused uncounted.
func (a *Accounts) claimAccount(ctx context.Context, email string, now time.Time) (time.Duration, error) {
	var wait time.Duration
	var refused error
	err := a.lockSubject(ctx, accountSubject(email), now, func(f *models.SignInFailure) {
		if f.Failures < accountFreeFailures {
			f.Failures++
			return
		}
		turn := now
		if f.LockedUntil != nil && f.LockedUntil.After(now) {
			turn = *f.LockedUntil
		}
		if wait = turn.Sub(now); wait > accountMaxWait {
			refused = throttled(wait, "many failed sign-ins for this account right now; try again in %d seconds", int(math.Ceil(wait.Seconds())))
			return
		}
		next := turn.Add(min(accountDelayBase<<min(f.Failures-accountFreeFailures, 10), accountDelayMax))
		f.Failures++
		f.LockedUntil = &next
	})
	if err != nil {
		return 0, err
	}
	return wait, refused
}

// lockSubject runs change on subject's row (a fresh one once the window has
// passed) while holding it, and saves the result. The row lock makes the
// check and the count one step on PostgreSQL; SQLite has a single writer.
func (a *Accounts) lockSubject(ctx context.Context, subject string, now time.Time, change func(*models.SignInFailure)) error {
	err := a.st.GormWriter().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).
			Create(&models.SignInFailure{Subject: subject, WindowStart: now}).Error; err != nil {
			return err
		}
		var f models.SignInFailure
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("subject = ?", subject).First(&f).Error; err != nil {
			return err
		}
		if now.Sub(f.WindowStart) > failureWindow && (f.LockedUntil == nil || !f.LockedUntil.After(now)) {
			f = models.SignInFailure{Subject: subject, WindowStart: now}
		}
		change(&f)
		return tx.Save(&f).Error
	})
	return services.DBErrorOrNil("accounts: throttle", err)
}

// forgive takes back the attempts a successful sign-in counted.
func (a *Accounts) forgive(ctx context.Context, address, email string) error {
	db := a.st.GormWriter().WithContext(ctx)
	if err := db.Where("subject = ?", accountSubject(email)).Delete(&models.SignInFailure{}).Error; err != nil {
		return services.DBError("accounts: throttle", err)
	}
	err := db.Model(&models.SignInFailure{}).Where("subject = ? AND failures > 0", addressSubject(address)).
		Update("failures", gorm.Expr("failures - 1")).Error
	return services.DBErrorOrNil("accounts: throttle", err)
}

func (a *Accounts) hashSlot(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(a.HashWait)
	defer t.Stop()
	select {
	case a.hashSlots <- struct{}{}:
		return func() { <-a.hashSlots }, nil
	case <-t.C:
		return nil, services.Errorf(services.CodeUnavailable, "the server is busy checking other passwords; try again in a moment")
	case <-ctx.Done():
		return nil, fmt.Errorf("accounts: waiting to check a password: %w", ctx.Err())
	}
}

// hash hashes a new password in a hashing slot.
func (a *Accounts) hash(ctx context.Context, password string) (string, error) {
	release, err := a.hashSlot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return hashPassword(password), nil
}

// check compares a password with a hash in a hashing slot.
func (a *Accounts) check(ctx context.Context, encoded, password string) (bool, error) {
	release, err := a.hashSlot(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	return checkPassword(encoded, password), nil
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
