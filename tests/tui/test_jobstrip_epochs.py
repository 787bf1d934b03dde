"""The job strip names the epoch from the second on: NeMo-RL's "Step s/S" restarts each epoch
(nemo_rl/algorithms/grpo.py at v0.4.0), so "step 5/10" alone would hide the epochs done."""

from __future__ import annotations

from rltui.joblog import TrainingStep
from rltui.widgets.jobstrip import JobStrip
from tests.tui import samples_monitor as S
from tests.tui.test_monitor import open_monitor, publish_all, settle


async def test_a_step_of_the_second_epoch_is_shown_with_its_epoch(wizard_app):
    for size in ((80, 24), (120, 40)):
        app = wizard_app(S.HEADER)
        async with app.run_test(size=size) as pilot:
            await open_monitor(app, pilot)
            publish_all(app)
            await settle(pilot)
            strip = app.screen.query_one(JobStrip)
            assert "epoch" not in strip.render().plain  # the sample is one epoch
            app.bus.step_records.publish([TrainingStep(20, 20, 1, avg_reward=0.5),
                                          TrainingStep(1, 20, 2, avg_reward=0.52)])
            await settle(pilot)
            shown = strip.render().wrap(app.console, strip.size.width)  # as the strip's 2 rows wrap it
            assert "step 1/20 of epoch 2" in shown[0].plain, (size, [line.plain for line in shown])
