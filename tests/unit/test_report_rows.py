"""The report's typed rows (records/rows.py's ReportRow): every table's CSV header is its row class's
columns, and those are the headers the report has always written (a column renamed, moved or dropped
here changes a file users read: the README says so). A row's cells are written as the
report writes them; rows are frozen; each class's columns are its own.

    .venv/bin/python -m pytest tests/unit/test_report_rows.py
"""

import dataclasses

import pytest

from hvdbench.results.analyses import (bench_tables, convergence, cost, efficiency, engines, links, stragglers,
                                       study_tables, ttt, verdict, waterfall)
from hvdbench.results.predict import throughput, time_to_train
from hvdbench.results.records.rows import SCALING_GROUP, TTT_GROUP, ReportRow, ScalingGroup, TttGroup, beside, cell
from hvdbench.results.render.tables import to_csv
from hvdbench.results.stats import aggregate

# Every report table's row class and its CSV's header, as written before the rows were typed.
HEADERS = [
    (aggregate.ScalingRow,  # scaling.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,nodes,"
     "gpus_per_node,gpus,scale,runs,ok,failed,aborted,timeout,n_throughput,throughput_mean,throughput_std,"
     "throughput_2sigma,throughput_per_gpu,baseline,speedup,efficiency,efficiency_2sigma,layout_source,"
     "hosts,link,cv,step_cv,other_cpus,other_gpu_procs,threads,steps,warmup_steps,flags"),
    (aggregate.LayoutsRow,  # layouts.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,gpus,layout,"
     "nodes,gpus_per_node,scale,reference,runs,ok,failed,aborted,timeout,throughput_mean,"
     "throughput_2sigma,relative,delta_pct,noise_2sigma_pct,within_noise,hosts,link"),
    (aggregate.TimeToTrainRow,  # time_to_train.csv
     "system,model,flavor,framework,engine,precision,levers,layout,nodes,gpus_per_node,gpus,scale,"
     "global_batch,result,runs,converged,failed,aborted,timeout,epochs_mean,time_per_epoch_min,"
     "samples_to_target_mean,time_per_1m_samples_min,ttt_min,ttt_rcp_min,rcp_factor,rcp_check,scoring,"
     "ttt_mean_min,ttt_std_min,ttt_2sigma_min,eval_every_epochs,ttt_resolution_s,metric,target,"
     "final_metric_mean,baseline,speedup,efficiency,speedup_rcp,layout_source,ruleset,rcp_note,rcp_mean,"
     "rcp_min,converge_mean,hosts,link"),
    (aggregate.EpochRow,  # epochs.csv
     "system,model,flavor,framework,engine,levers,gpus,layout,global_batch,time_per_epoch_min,epochs_mean,"
     "samples_to_target_mean,time_per_1m_samples_min,precision,runs,converged"),
    (waterfall.WaterfallRow,  # waterfall.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,nodes,"
     "gpus_per_node,gpus,baseline,ideal,comm_loss,imbalance_loss,data_loss,compute_loss,unattributed,"
     "measured,data_from,base_step_ms,step_ms,data_ms,compute_ms,comm_ms,update_ms,other_ms,compute_mfu"),
    (stragglers.StragglerRow,  # stragglers.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,rank,"
     "host,local_rank,device,gpu_index,gpu_uuid,runs,step_ms,compute_ms,data_ms,comm_ms,vs_others,"
     "vs_others_2sigma,threshold,straggler,partial"),
    (stragglers.StragglerHostRow,  # stragglers_hosts.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,host,"
     "ranks,runs,compute_ms,vs_others,vs_others_2sigma,threshold,straggler"),
    (links.LinkPairRow,  # links.csv
     "run_id,started_at,layout,kind,host_a,host_b,rank_a,rank_b,device_a,device_b,backend,latency_bytes,"
     "latency_us,bandwidth_bytes,bandwidth_gb_s,vs_best,slow,nic_a,nic_b,nic_gb_s,intra_link,wrong,fault"),
    (engines.EngineRow,  # engines.csv
     "system,model,flavor,framework,precision,levers,mode,batch_per_gpu,accum_steps,layout,gpus,engine,"
     "reference,runs,throughput_mean,throughput_2sigma,vs_reference,vs_reference_2sigma,within_noise,"
     "data_ms,compute_ms,comm_ms,update_ms,other_ms,shard_parameters,why,flags"),
    (efficiency.EfficiencyRow,  # compute.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,gpus,"
     "runs,throughput_per_gpu,flops_per_sample,model_tflops_per_gpu,peak_tflops,mfu,measured_peak_tflops,"
     "mfu_measured,mem_allocated_gb,mem_reserved_gb,mem_resident_gb,mem_estimate_gb,energy_j_per_sample,"
     "power_w_per_gpu,energy_to_train_j,mlperf_samples_per_row,published_share,published_ref,note"),
    (ttt.TttWaterfallRow,  # ttt_waterfall.csv
     "system,model,flavor,framework,engine,precision,levers,layout,nodes,gpus_per_node,gpus,global_batch,"
     "baseline,base_global_batch,gpu_ratio,ideal_min,convergence_min,throughput_min,comm_min,data_min,"
     "compute_min,unattributed_min,eval_min,other_min,measured_min,unit,trained,base_trained,throughput,"
     "base_throughput,train_s,base_train_s,eval_s,base_eval_s,other_s,base_other_s,runs_used,"
     "base_runs_used,trained_from,train_from,eval_from,split_from,note"),
    (convergence.ConvergenceRow,  # convergence.csv
     "system,model,flavor,framework,engine,precision,levers,source,ruleset,unit,points,batch_sizes,"
     "trained,s_min,b_crit,r2,max_rel_residual,rms_rel_residual,status,note"),
    (study_tables.StudySpeedupRow,  # study_speedup.csv
     "system,model,flavor,framework,precision,basis,gpus,layout,baseline,speedup,efficiency,"
     "published_speedup,vs_published,ttt_min,published_ttt_min,throughput_mean,throughput_2sigma,hosts,"
     "link"),
    (bench_tables.CommRow,  # comm_vs_training.csv
     "model,flavor,framework,precision,layout,gpus,nodes,controller,throughput_mean,step_ms,gradient_mib,"
     "message_mib,busbw_gb_s,mpi_busbw_gb_s,allreduce_ms,comm_share,bench_run_id"),
    (bench_tables.IoTableRow,  # io_vs_training.csv
     "model,flavor,framework,layout,gpus,throughput_mean,dataset,kind,caches_dropped,io_samples_s,"
     "io_samples_s_min,decoded_samples_s,h5py_samples_s,reader_vs_h5py,feed,bench_run_id"),
    (throughput.PredictionRow,  # prediction.csv (issue 58 item 7: the fit's figures moved to prediction_fit.csv)
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,nodes,"
     "gpus_per_node,gpus,global_batch,result,baseline,predicted_throughput,predicted_throughput_low,"
     "predicted_throughput_high,interval,speedup,efficiency,measured_throughput,predicted_vs_measured,fitted,"
     "fitted_on,flags,note"),
    (time_to_train.TttPredictionRow,  # prediction.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,nodes,"
     "gpus_per_node,gpus,global_batch,result,baseline,predicted_throughput,predicted_throughput_low,"
     "predicted_throughput_high,interval,speedup,efficiency,measured_throughput,predicted_vs_measured,fitted,"
     "fitted_on,flags,note,predicted_ttt_min,predicted_ttt_low_min,predicted_ttt_high_min,grade,grade_promise,"
     "weak_fit,measured_ttt_min,ttt_predicted_vs_measured"),
    (throughput.PredictionFitRow,  # prediction_fit.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,global_batch,"
     "result,step_ms,work_ms,allreduce_ms,exposed_comm_ms,interval_from,link_kind,busbw_gb_s,latency_us,"
     "allreduce_from,exposure,ranks_per_machine_limit"),
    (time_to_train.TttPredictionFitRow,  # prediction_fit.csv
     "system,model,flavor,framework,engine,precision,levers,mode,batch_per_gpu,accum_steps,layout,global_batch,"
     "result,step_ms,work_ms,allreduce_ms,exposed_comm_ms,interval_from,link_kind,busbw_gb_s,latency_us,"
     "allreduce_from,exposure,ranks_per_machine_limit,global_batch_from,trained_unit,predicted_trained,"
     "measured_trained,samples_from,training_rate,training_rate_low,training_rate_high,measured_training_rate,"
     "ttt_baseline,ideal_ttt_min,convergence_min,throughput_min,eval_min,other_min,rate_from,convergence_from,"
     "eval_from,least_model_parallel,fitted_efficiency,rate_prior"),
    (verdict.CheckRow,  # verdict.csv (issue 55)
     "check,state,figure,rule,threshold,severity,subject,detail,source,section"),
    (cost.CostRow,  # cost.csv (issue 55)
     "system,model,flavor,framework,engine,precision,levers,layout,gpus,source,grade,runs,throughput_per_gpu,"
     "speedup,efficiency,ttt_min,run_gpu_hours,gpu_hours_to_train,energy_kwh_to_train,gpu_hour_price,run_cost,"
     "cost_to_train"),
]


@pytest.mark.parametrize("row_type, header", HEADERS, ids=[t.__name__ for t, _ in HEADERS])
def test_every_table_s_columns_are_the_header_it_writes(row_type, header):
    assert issubclass(row_type, ReportRow) and dataclasses.is_dataclass(row_type)
    assert ",".join(row_type.columns()) == header
    assert to_csv([], row_type.columns()) == header + "\n"


def test_the_four_tables_are_written_under_their_row_classes():
    assert [(name, row_type.__name__) for name, row_type in aggregate.Tables.FILES] == [
        ("scaling", "ScalingRow"), ("layouts", "LayoutsRow"), ("time_to_train", "TimeToTrainRow"),
        ("epochs", "EpochRow")]


def test_the_groups_are_the_leading_columns_of_the_tables_grouped_by_them():
    assert SCALING_GROUP == TTT_GROUP + ("mode", "batch_per_gpu", "accum_steps")
    for row_type in (aggregate.ScalingRow, aggregate.LayoutsRow, waterfall.WaterfallRow, stragglers.StragglerRow,
                     efficiency.EfficiencyRow, throughput.PredictionRow, throughput.PredictionFitRow):
        assert issubclass(row_type, ScalingGroup) and row_type.columns()[:len(SCALING_GROUP)] == SCALING_GROUP
    for row_type in (aggregate.TimeToTrainRow, ttt.TttWaterfallRow, convergence.ConvergenceRow):
        assert issubclass(row_type, TttGroup) and row_type.columns()[:len(TTT_GROUP)] == TTT_GROUP


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pair(ReportRow):
    layout: str
    bandwidth_gb_s: float | None
    slow: bool | None
    wrong: int = 0
    hosts: tuple = beside(())


@dataclasses.dataclass(frozen=True, kw_only=True)
class WiderPair(Pair):
    note: str = ""


def test_cells_are_written_as_the_report_writes_them():
    assert (cell(None), cell(True), cell(False), cell(0.1 + 0.2), cell(3), cell("1x2")) == (
        "", "yes", "no", "0.3", "3", "1x2")
    row = Pair(layout="1x2", bandwidth_gb_s=None, slow=True, hosts=("a", "b"))
    assert Pair.columns() == ("layout", "bandwidth_gb_s", "slow", "wrong")  # `beside` is not a column
    assert row.cells() == ["1x2", "", "yes", "0"]
    # Under a wider table's columns (prediction.csv's throughput rows under time to train's): empty there.
    assert WiderPair.columns() == Pair.columns() + ("note",) and row.cells(WiderPair.columns())[-1] == ""
    assert to_csv([row], WiderPair.columns()) == "layout,bandwidth_gb_s,slow,wrong,note\n1x2,,yes,0,\n"


@pytest.mark.parametrize("value, text", [
    (0.87345678, "0.8735"), (2 / 3, "0.6667"), (0.95, "0.95"), (1.0, "1"), (12.3456, "12.35"),
    (123456.7, "123457"), (999.96, "1000"), (-3.14159, "-3.142"), (1.23456e-05, "1.235e-05"),
    (0.00049999, "0.0005"), (2.5e17, "2.500e+17"), (0.0, "0"), (-0.0, "0"), (float("nan"), "nan"), (float("inf"), "inf")])
def test_a_float_cell_carries_four_significant_digits_and_reads_back_as_its_rounded_value(value, text):
    # Issue 58: 0.30000000000000004 and 17-digit shares read as a precision nobody measured.
    assert cell(value) == text
    if value == value:  # not nan: the cell is the value to its 4th digit, whatever notation
        assert float(text) == pytest.approx(value, rel=5e-4, abs=0)


def test_a_subclass_has_its_own_columns_whichever_class_is_asked_first():
    assert WiderPair.columns() == ("layout", "bandwidth_gb_s", "slow", "wrong", "note")
    assert Pair.columns() == ("layout", "bandwidth_gb_s", "slow", "wrong")
    assert throughput.PredictionRow.columns() != time_to_train.TttPredictionRow.columns()


def test_rows_are_frozen_and_built_with_every_column():
    row = Pair(layout="1x2", bandwidth_gb_s=1.5, slow=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.slow = True  # no section writes into a row: a figure it needs is a field it reads
    with pytest.raises(TypeError):
        Pair(layout="1x2", bandwidth_gb_s=1.5)  # a column left out is an error, not an empty cell
