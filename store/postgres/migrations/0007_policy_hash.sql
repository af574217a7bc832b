-- 0007: the policy file behind a decision made by a policy rule. A
-- request decided at creation by a rule records the hex SHA-256 of the
-- policy file in force on its decision's event (docs/policy.md), so an
-- audit can tell which version of the rules decided.

ALTER TABLE events ADD COLUMN policy_hash text NOT NULL DEFAULT '';
