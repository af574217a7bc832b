-- 0026: edit, then rebind, and what an adapter claims (docs/protocol.md,
-- "Edits" and "What the adapter claims").
--
-- A reviewer who approves a tool call with changed arguments denies the
-- original and creates, in the same transaction, a new request with the
-- edited arguments: the original names the new one (replaced_by) and the
-- new one names the original (derived_from). Both are '' on every other
-- request, and each is written once, by the edit's transaction.
ALTER TABLE requests ADD COLUMN replaced_by TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN derived_from TEXT NOT NULL DEFAULT '';

-- Once written, neither changes: the edit's Rebind and Derive already
-- write only an empty one; this makes a future mistake fail loudly, as
-- requests_terminal_is_final does.
CREATE TRIGGER requests_edit_links_once
BEFORE UPDATE OF replaced_by, derived_from ON requests
WHEN (OLD.replaced_by <> '' AND NEW.replaced_by IS NOT OLD.replaced_by)
    OR (OLD.derived_from <> '' AND NEW.derived_from IS NOT OLD.derived_from)
BEGIN
    SELECT RAISE(ABORT, 'an edit''s links are written once');
END;

-- What the adapter claims about a tool call, shown beside the facts: a
-- preview of its effect (preview_type 'diff' or 'text', '' for none) and
-- how reversible it is ('reversible', 'partial', 'irreversible', '' for
-- not said). Written at creation, never changed.
ALTER TABLE requests ADD COLUMN preview_type TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN preview_content TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN reversibility TEXT NOT NULL DEFAULT '';
