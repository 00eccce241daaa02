"""People checking what the models and the benchmark say: samples for annotators and their agreement.

:mod:`.sample` draws a stratified, seeded sample of judge verdicts or gold flags (``benchaudit sample``);
:mod:`.gold_audit` flags questions where most models agree against gold (``benchaudit audit-gold``);
:mod:`.judge_agreement` compares two judges, or a judge with people (``benchaudit judge-agreement``);
:mod:`.agreement` holds the statistics they share (Cohen's kappa, confirmed rates).
"""
