-- +goose Up
-- A user whose password someone else saw (the first admin's, printed at the
-- first start) must choose a new one at the next sign-in.
ALTER TABLE users ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE users DROP COLUMN must_change_password;
