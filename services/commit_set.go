package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// commitSet writes a set of changes to existing actions at once: on
// PostgreSQL in one statement, on SQLite in one transaction on the writer
// connection. With commitIn and insertIntents it is the only code that
// writes the actions table.
//
// Each change is conditional on the version that was read, exactly as in
// commitIn: a change whose action moved on since it was read is not written
// (no entry, no alert) and is left out of the result, and the others are
// written regardless. So with several processes on one database a change
// decided on the same read is written by one of them only. Each written
// change bumps its action's entry sequence, appends its entry with the new
// sequence and writes its alerts to the outbox, with data.entry.seq filled
// in, and one delivery per matching enabled endpoint.
//
// The changes must be of distinct existing actions (prev set). It returns the
// changes that were written; u.alerted is set if one of them wrote alerts.
// The caller wakes the dispatcher once the set is committed.
func (l *Ledger) commitSet(ctx context.Context, u *unit, chs []*change) ([]*change, error) {
	if len(chs) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(chs))
	for _, ch := range chs {
		if ch.prev == nil {
			return nil, errors.New("ledger: a set of changes creates no action")
		}
		if seen[ch.prev.ID] {
			return nil, fmt.Errorf("ledger: action %s changes twice in one set", ch.prev.ID)
		}
		seen[ch.prev.ID] = true
	}
	var (
		done []*change
		err  error
	)
	if l.st.Dialect == Postgres {
		done, err = l.updateSetPostgres(ctx, u, chs)
	} else {
		done, err = l.updateSetSQLite(ctx, u, chs)
	}
	if err != nil {
		return nil, err
	}
	for _, ch := range done {
		if len(ch.events) > 0 {
			u.alerted = true
		}
	}
	return done, nil
}

// pgUpdateSet is pgUpdateWithOutbox for many actions: the new states and
// the entries come in as parallel arrays sorted by id, each action's alerts
// as one JSON array. Only a row that still has the version read is updated:
// one that another writer changed meanwhile drops out, with its entry and
// alerts. The update returns what the inserts need, so nothing is joined
// again.
//
// The conditions are written "x = ANY(ARRAY[y])", not "x = y", so that they
// are not join clauses the planner can hash or merge: it then has to walk
// the arrays and find each row by primary key, in the arrays' order. With
// plain equalities it hashes the arrays and scans every action whenever its
// estimates make that look cheaper (a few hundred ids, fewer than a few
// hundred thousand actions, or no statistics yet), which is slower at any
// size and locks rows in no particular order. In the arrays' order, two sets
// that share actions lock them in the same order and wait for each other
// instead of deadlocking.
const pgUpdateSet = `
WITH a AS (
	UPDATE actions a SET status = v.status, attempt = v.attempt, version = v.new_version,
		lease_until = v.lease_until, result = v.result::jsonb, external_ref = v.external_ref,
		retriable = v.retriable, updated_at = v.updated_at, entry_seq = a.entry_seq + 1
	FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::timestamptz[], $7::text[],
		$8::text[], $9::bool[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::int[], $16::text[], $17::timestamptz[], $18::timestamptz[], $19::text[])
		AS v(id, version, status, attempt, new_version, lease_until, result, external_ref, retriable, updated_at,
			entry_id, entry_type, actor_kind, actor_name, entry_attempt, payload, occurred_at, recorded_at, alerts)
	WHERE a.id = ANY(ARRAY[v.id::uuid]) AND a.version = ANY(ARRAY[v.version])
	RETURNING a.id, a.namespace, a.entry_seq, v.entry_id, v.entry_type, v.actor_kind, v.actor_name,
		v.entry_attempt, v.payload, v.occurred_at, v.recorded_at, v.alerts
), e AS (
	INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
		occurred_at, recorded_at)
	SELECT a.entry_id::uuid, a.id, a.namespace, a.entry_seq, a.entry_type, a.actor_kind, a.actor_name,
		a.entry_attempt, a.payload::jsonb, a.occurred_at, a.recorded_at
	FROM a
` + pgOutbox + `
SELECT id::text FROM a`

// updateSetPostgres writes the set in one statement (pgUpdateSet). Standing
// alone, a deadlock with a writer that locks rows in another order (a batch
// of entries in one transaction) aborts the whole statement, which is then
// retried as it was: it is conditional throughout.
func (l *Ledger) updateSetPostgres(ctx context.Context, u *unit, chs []*change) ([]*change, error) {
	k := len(chs)
	var (
		ids, statuses, entryIDs, entryTypes, actorKinds, actorNames, payloads = make([]string, k),
			make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
		versions, attempts, newVersions = make([]int, k), make([]int, k), make([]int, k)
		leases, occurred                = make([]*time.Time, k), make([]*time.Time, k)
		results, externalRefs, alerts   = make([]*string, k), make([]*string, k), make([]*string, k)
		retriable                       = make([]bool, k)
		updatedAt, recordedAt           = make([]time.Time, k), make([]time.Time, k)
		entryAttempts                   = make([]*int, k)
	)
	// Every set locks its rows in id order.
	sorted := slices.Clone(chs)
	slices.SortFunc(sorted, func(a, b *change) int { return strings.Compare(a.prev.ID, b.prev.ID) })
	for i, ch := range sorted {
		n := nextState(ch)
		e := &ch.entry
		ids[i], versions[i], statuses[i], attempts[i], newVersions[i] = n.ID, ch.prev.Version, string(n.Status), n.Attempt, n.Version
		leases[i], externalRefs[i], retriable[i], updatedAt[i] = n.LeaseUntil, n.ExternalRef, n.retriable, n.UpdatedAt
		if n.Result != nil {
			s := string(n.Result)
			results[i] = &s
		}
		entryIDs[i], entryTypes[i], actorKinds[i], actorNames[i] = e.ID, e.Type, e.Actor.Kind, e.Actor.Name
		entryAttempts[i], payloads[i], occurred[i], recordedAt[i] = e.Attempt, string(e.Payload), e.OccurredAt, e.RecordedAt
		if msgs := outboxFor(ch, n); len(msgs) > 0 {
			s := alertsJSON(msgs)
			alerts[i] = &s
		}
	}
	args := []any{ids, versions, statuses, attempts, newVersions, leases, results, externalRefs, retriable, updatedAt,
		entryIDs, entryTypes, actorKinds, actorNames, entryAttempts, payloads, occurred, recordedAt, alerts}
	var updated map[string]bool
	for try := 1; ; try++ {
		var err error
		updated, err = returnedIDs(u.w.QueryContext(ctx, pgUpdateSet, args...))
		if !u.inTx && deadlocked(err) && try < 5 && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, dbError("ledger: update actions", err)
		}
		break
	}
	done := make([]*change, 0, len(updated))
	for _, ch := range chs {
		if updated[ch.prev.ID] {
			done = append(done, ch)
		}
	}
	return done, nil
}

// alertsJSON is the JSON array of a change's alerts that pgUpdateSet reads
// with jsonb_to_recordset; the payloads are already JSON.
func alertsJSON(msgs []outboxMessage) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"`)
		b.WriteString(m.ID)
		b.WriteString(`","type":`)
		typ, _ := json.Marshal(m.Type)
		b.Write(typ)
		b.WriteString(`,"payload":`)
		b.Write(m.Payload)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// updateSetSQLite writes the set in one transaction on the writer
// connection, each change as commitIn writes it alone; a change that lost
// its race wrote nothing and is skipped, any other failure rolls the whole
// set back.
func (l *Ledger) updateSetSQLite(ctx context.Context, u *unit, chs []*change) ([]*change, error) {
	var done []*change
	err := l.sqliteTx(ctx, u, func(tx dbtx) error {
		done = done[:0]
		for _, ch := range chs {
			_, err := l.updateSQLite(ctx, tx, ch)
			if errors.Is(err, errLostRace) {
				continue
			}
			if err != nil {
				return err
			}
			done = append(done, ch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}
