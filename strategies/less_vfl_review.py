"""LESS-VFL's stage-2 cut weighed again on validation (:class:`Stage2Review`), a part of
:class:`vflfs.strategies.less_vfl.LessVFL`.

Stage 2 judges the parties by what a top model reads from the pre-trained embeddings. Where
the dense model learned little of a party's few relevant columns among many noise columns,
stage 2 closes the party or leaves it few embedding components, and every count the choice
trains then reads too little of it. One more candidate, after the count is chosen, reads every
component at the parties that keep a feature and adds the closed parties' features that rank
with those kept; the smallest good count still wins, so it is chosen only where validation
says stage 2's cut cost accuracy.
"""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig

from .count_ladder import Candidate
from .strategy import log


class Stage2Review:
    """The count choice's second look (:meth:`CountChoice.second_look`) for LESS-VFL: the
    strategy holds stage 2's components (``components``), stage 3's scores (``scores``, zero
    at closed parties) and the closed parties' own rankings (``closed_scores``)."""

    name: str
    cfg: DictConfig
    components: list[list[int]] | None
    scores: list[np.ndarray]
    closed_scores: dict[int, np.ndarray]

    def second_look(self, chosen: Candidate, tried: list[Candidate]) -> Candidate | None:
        """The features of ``chosen`` (or, where the model on every feature won, of the best
        count ``tried``), each party that keeps one reading every component again, and the
        features of the parties stage 2 closed that rank with them (:meth:`reopen`). None where
        the counts already read every component of their parties and no closed party reopens.

        Stage 2 judges the parties by the pre-trained embeddings, which on many noisy columns
        carry little of a party's few relevant ones: it closes such a party, or leaves it one
        component (3000 rows, 300 columns over 4 parties, 8 relevant: a party holding 2 of them
        closed, and one holding 3 kept one component; 61.7% on test against 83.8% for
        ``local_lasso``). Where the counts lose to the model on every feature because their
        parties read too few components, the best of them is widened (four classes in the
        quadrants of two columns of one party: every count at its one component scored 0.56-0.60
        on validation against 0.89). The candidate wins only where no smaller count scores
        within the tolerance of it (:func:`~vflfs.strategies.count_ladder.smallest_good`):
        validation decides whether stage 2's cut cost accuracy."""
        if chosen.dense or chosen.plain:
            counts = [c for c in tried if not (c.dense or c.plain or c.reopened)]
            if not counts:
                return None
            chosen = max(counts, key=lambda c: c.val_metric)
        assert self.components is not None
        width = int(self.cfg.model.bottom.embedding_size)
        kept, reopened = self.reopen(chosen)
        narrowed = [
            m
            for m, k in enumerate(chosen.kept)
            if len(k) and m not in self.closed_scores and len(self.components[m]) < width
        ]
        if not reopened and not narrowed:
            return None
        k = sum(len(f) for f in kept)
        return Candidate(k, kept, 0, 0, reopened=tuple(sorted({*reopened, *narrowed})))

    def reopen(self, chosen: Candidate) -> tuple[list[np.ndarray], list[int]]:
        """``chosen``'s features plus those of the parties stage 2 closed that their own
        stage-3 ranking (on all their components) scores at least as high as the lowest-scored
        feature ``chosen`` keeps at an open party, and the parties so reopened. Stage 3 scores
        on one grid of lambdas at every party, so a closed party's relevant columns outrank
        its noise as the open parties' do."""
        kept = list(chosen.kept)
        kept_scores = [
            s[k]
            for m, (s, k) in enumerate(zip(self.scores, chosen.kept, strict=True))
            if len(k) and m not in self.closed_scores  # a closed party's features read nothing
        ]
        if not self.closed_scores or not kept_scores:
            return kept, []
        floor = max(float(np.min(np.concatenate(kept_scores))), np.finfo(float).tiny)
        reopened = []
        for m, scores in sorted(self.closed_scores.items()):
            best = np.flatnonzero(scores >= floor).astype(np.int64)
            if len(best):
                kept[m], reopened = best, [*reopened, m]
        if not reopened:
            log.info(
                "%s: parties %s, closed by stage 2, stay closed: none of their features ranks "
                "with those kept",
                self.name,
                sorted(self.closed_scores),
            )
        return kept, reopened
