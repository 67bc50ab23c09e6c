"""Workflows: an engine, then what reads its output, over one model client.

Engines (:mod:`evolve.calibration`, :mod:`evolve.consilium`) write their run folder's tables
and never call a reporter. A workflow chains the steps a command runs and owns the client they
share, so the embedded server starts once:

* :func:`run_calibration` - calibrate every criterion, audit the winners for semantic drift
  (unless ``config.audit`` is off), then write ``report.md``/``report.json``
  (``evolve calibrate``);
* :func:`calibrate` - the short Python path (``evolve.calibrate``): a pack folder or an
  in-memory pack, a rubric id, folder or bundle, an endpoint URL or a client; in-memory inputs
  are written into the run folder, the split is made when none is given, and a
  :class:`CalibrationSummary` is returned;
* :func:`run_and_judge` - generate consilium outputs, judge them (optionally with calibrated
  guidance), then write the bench tables (``evolve bench run``);
* :func:`run_otb` - answer OpenTumorBoard's Board Simulation and Specialist Turn items, judge
  the extracted answers, then write the OpenTumorBoard tables (``evolve otb run``);
* :func:`run_judge` - score new targets (a pack or a table, rated or not) with a calibration
  run's judge file, then write the scoring report (``evolve judge``); :func:`load_judge` is its
  Python face: ``evolve.load_judge("archives/RUN").score(frame)``;
* :class:`CalibrateOptions`, :class:`BenchRunOptions`, :class:`OtbRunOptions` - what ``evolve
  calibrate``, ``evolve bench run`` and ``evolve otb run`` were given; ``options.config()`` is the
  engine configuration they make (a new run's layers, or a resumed run's stored settings);
* :func:`config_reference` - every configuration key, from the models (``evolve config keys``);
* :func:`plan_calibration_run`, :func:`plan_judge_run` - what ``evolve calibrate`` and ``evolve
  judge`` would send, by phase, before anything is sent (``--plan``; a
  :class:`~evolve.runs.CallPlan`), prompt tokens counted by :func:`token_counter`.

The command line calls these; a library user may call the engines alone.
"""

from evolve.workflows._api import CalibrationSummary, CriterionSummary, Verdict, calibrate
from evolve.workflows._bench import run_and_judge
from evolve.workflows._calibration import run_calibration
from evolve.workflows._judge import CalibratedJudge, CriterionScore, JudgeRunOptions, ScoringSummary, load_judge, run_judge
from evolve.workflows._options import BenchRunOptions, CalibrateOptions, OtbRunOptions
from evolve.workflows._otb import OtbRunResult, run_otb
from evolve.workflows._plan import plan_calibration_run, plan_judge_run, token_counter
from evolve.workflows._reference import ConfigKey, config_keys, config_reference, key_reference, replace_marked

__all__ = ["BenchRunOptions", "CalibrateOptions", "CalibratedJudge", "CalibrationSummary", "ConfigKey", "CriterionScore", "CriterionSummary", "JudgeRunOptions",
           "OtbRunOptions", "OtbRunResult", "ScoringSummary", "Verdict", "calibrate", "config_keys", "config_reference", "key_reference",
           "load_judge", "plan_calibration_run", "plan_judge_run", "replace_marked", "run_and_judge", "run_calibration", "run_judge", "run_otb",
           "token_counter"]
