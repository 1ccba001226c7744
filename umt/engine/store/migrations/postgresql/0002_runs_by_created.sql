-- Newest runs first without sorting them all: the runs list (umt runs, umt web) pages by
-- (created_at, id), and with 100,000 runs a sort of the whole table took over 100 ms.

CREATE INDEX runs_by_created ON runs (created_at, id);
