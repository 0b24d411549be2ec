package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// answer is one entry's status and outcome, read by a goroutine that may
// not fail the test itself.
type answer struct {
	status        int
	outcome, code string
	err           error
}

func sendEntry(c *http.Client, url, key, body string) answer {
	req, err := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{err: err}
	}
	var m struct {
		Outcome string `json:"outcome"`
		Error   *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return answer{status: res.StatusCode, err: fmt.Errorf("%w: %s", err, raw)}
	}
	a := answer{status: res.StatusCode, outcome: m.Outcome}
	if m.Error != nil {
		a.code = m.Error.Code
	}
	return a
}

// TestReliabilityLimitExactAcrossReplicas: 200 refunds of 10 against a
// budget of 500 in one group, sent at once through two serve processes on
// one PostgreSQL, leave exactly 50 counted, 20 times over; and a freeze
// started on one replica holds on the other within a second.
func TestReliabilityLimitExactAcrossReplicas(t *testing.T) {
	reliability(t)
	t.Parallel()
	dbURL := dbtest.PostgresURL(t)
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbURL}
	a := serve(t, dir, env, "--migrate")
	b := serve(t, dir, env)
	agent := createKey(t, dir, env, "--namespace", "shop", "--name", "refunds", "--role", "agent")
	operator := createKey(t, dir, env, "--namespace", "shop", "--name", "oncall", "--role", "operator")
	admin := createKey(t, dir, env, "--name", "root", "--role", "admin")
	status, m := post(t, a.url+"/v1/limits", admin, `{"name":"refunds per customer","namespace":"shop","tools":["shop.refund"],
		"amount":"params.amount","group_by":"params.customer","window":3600,"max":500,"over":"deny"}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	limitID := m["id"].(string)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	urls := []string{a.url, b.url}

	for round := range 20 {
		customer := fmt.Sprintf("cus-%d", round)
		answers := make([]answer, 200)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				<-start
				answers[i] = sendEntry(c, urls[i%2], agent, fmt.Sprintf(`{"key":"refund:%s:%d","type":"intent","tool":"shop.refund",`+
					`"effect":"keyed","params":{"customer":%q,"amount":10}}`, customer, i, customer))
			})
		}
		close(start)
		wg.Wait()
		proceeded, denied := 0, 0
		for i, an := range answers {
			require.NoError(t, an.err, "round %d, intent %d", round, i)
			switch {
			case an.status == http.StatusCreated && an.outcome == "proceed":
				proceeded++
			case an.status == http.StatusConflict && an.code == "limit_exceeded":
				denied++
			default:
				t.Fatalf("round %d, intent %d: %d %s %s", round, i, an.status, an.outcome, an.code)
			}
		}
		require.Equal(t, 50, proceeded, "round %d: exactly the budget ran", round)
		require.Equal(t, 150, denied, "round %d", round)
		req, _ := http.NewRequest("GET", b.url+"/v1/limits/"+limitID+"/usage?group="+customer, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		res, err := c.Do(req)
		require.NoError(t, err)
		var u struct {
			Groups []struct {
				Used    float64 `json:"used"`
				Actions int     `json:"actions"`
			} `json:"groups"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&u))
		res.Body.Close()
		require.Len(t, u.Groups, 1)
		require.Equal(t, 500.0, u.Groups[0].Used, "round %d: no overspend", round)
		require.Equal(t, 50, u.Groups[0].Actions, "round %d", round)
	}

	// A freeze started through one replica holds on the other within a
	// second: a new key is held, a retry answered frozen.
	an := sendEntry(c, b.url, agent, `{"key":"mail:retry","type":"intent","tool":"shop.mail","params":{}}`)
	require.Equal(t, http.StatusCreated, an.status)
	an = sendEntry(c, b.url, agent, `{"key":"mail:retry","type":"failed","attempt":1,"error":"busy","retriable":true}`)
	require.Equal(t, http.StatusOK, an.status)
	status, m = post(t, a.url+"/v1/freezes", operator, `{"namespace":"shop","reason":"incident"}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	started := time.Now()
	var held, frozen time.Duration
	for i := 0; (held == 0 || frozen == 0) && time.Since(started) < 3*time.Second; i++ {
		if held == 0 {
			if an := sendEntry(c, b.url, agent, fmt.Sprintf(`{"key":"mail:new:%d","type":"intent","tool":"shop.mail","params":{}}`, i)); an.outcome == "pending_approval" {
				held = time.Since(started)
			}
		}
		if frozen == 0 {
			if an := sendEntry(c, b.url, agent, `{"key":"mail:retry","type":"intent","tool":"shop.mail","params":{}}`); an.outcome == "frozen" {
				require.Equal(t, http.StatusConflict, an.status)
				frozen = time.Since(started)
			} else {
				require.Equal(t, http.StatusCreated, an.status, "before the freeze is seen the retry runs: %+v", an)
				an = sendEntry(c, b.url, agent, fmt.Sprintf(`{"key":"mail:retry","type":"failed","attempt":%d,"error":"busy","retriable":true}`, i+2))
				require.Equal(t, http.StatusOK, an.status, "%+v", an)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the other replica held new keys after %v and answered frozen after %v", held, frozen)
	require.NotZero(t, held, "the other replica never held a new key")
	require.NotZero(t, frozen, "the other replica never answered frozen")
	require.Less(t, held, time.Second)
	require.Less(t, frozen, time.Second)
}
