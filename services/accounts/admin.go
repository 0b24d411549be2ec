package accounts

import (
	"context"
	"time"

	"github.com/arbiter-ledger/arbiter/services"
)

// NamespaceActionsCap bounds how far NamespaceSummaries counts actions, so
// the admin page stays cheap on namespaces with millions of them.
const NamespaceActionsCap = 10000

// NamespaceSummary is a namespace with what an admin wants to see beside it.
type NamespaceSummary struct {
	Name       string
	CreatedAt  time.Time
	ActiveKeys int
	// Actions is exact up to NamespaceActionsCap; past it, it is
	// NamespaceActionsCap+1 and means "more than the cap".
	Actions int
}

// NamespaceSummaries lists every namespace by name with its number of active
// API keys and of actions (counted up to NamespaceActionsCap+1 each).
func (k *Keys) NamespaceSummaries(ctx context.Context) ([]NamespaceSummary, error) {
	var out []NamespaceSummary
	// The capped count walks at most cap+1 entries of actions_namespace_id_idx.
	err := k.st.Gorm().WithContext(ctx).Raw(`
		SELECT n.name, n.created_at,
			(SELECT count(*) FROM api_keys k WHERE k.namespace = n.name AND k.revoked_at IS NULL) AS active_keys,
			(SELECT count(*) FROM (SELECT 1 FROM actions a WHERE a.namespace = n.name LIMIT ?) capped) AS actions
		FROM namespaces n ORDER BY n.name`, NamespaceActionsCap+1).Scan(&out).Error
	return out, services.DBErrorOrNil("keys: namespace summaries", err)
}

// CreateNamespace creates namespace ns, and says so clearly when it exists.
func (k *Keys) CreateNamespace(ctx context.Context, ns string) error {
	if err := services.ValidateNamespace(ns); err != nil {
		return err
	}
	created, err := k.insertNamespace(ctx, ns)
	if err != nil {
		return err
	}
	if !created {
		return services.Errorf(services.CodeConflict, "namespace %q exists already", ns)
	}
	return nil
}
